//go:build linux

package crash

import (
	"encoding/json"
	"testing"

	"templatefs/store"
	"templatefs/tests/harness"
)

// readLaunch reads the launch ID of "held" from `cat leases/held` on a
// mount of its own into f.launch.
func (f *fixture) readLaunch(t *testing.T) {
	t.Helper()
	d := f.mount(t)
	var l leaseFile
	if err := json.Unmarshal([]byte(harness.MustTool(t, "cat", f.path("leases", "held"))), &l); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	if len(l.LaunchID) != 32 {
		t.Fatalf("leases/held has launch ID %q", l.LaunchID)
	}
	f.launch = l.LaunchID
}

// launchedCat is the tool command of a clone started with held's launch
// ID (store.LaunchEnv) reading a payload of g1: its open binds held.
func launchedCat() []string {
	return []string{"env", store.LaunchEnv + "={launch}", "cat", "MNT/generations/" + g1 + "/payload/state.bin"}
}

// launchScenarios are the crash rows of the launch ID bind and of
// cancel: SIGKILL after each commit, and the lease is found in the state
// the commit made (bound; gone), consistent with fsck.
func launchScenarios(mountOp func(op ...string) func(t *testing.T, f *fixture, fp string),
	cancel func(clone, path string) func(t *testing.T, f *fixture, fp string)) []scenario {
	return []scenario{
		{
			// The bind commits, the daemon dies before answering the
			// open: the lease is bound to the cat that opened, which
			// has exited by now, so the next daemon records the exit at
			// its start and rm settles it.
			name: "autobind-committed", via: viaMount,
			setup: func(t *testing.T, f *fixture) { f.readLaunch(t) },
			op:    mountOp(launchedCat()...),
			check: func(t *testing.T, f *fixture, v *view) {
				if l := wantLease(t, v, "held", g1, store.Exited); l.Process == nil || l.Process.PID <= 0 {
					t.Errorf("held is bound to %+v, want the opener's pid", l.Process)
				}
				harness.MustTool(t, "rm", f.path("leases", "held"))
				f.released["held"] = true
			},
		},
		{
			name: "cancel-committed", via: viaMount,
			op:    cancel("held", "MNT/leases/held"),
			check: func(t *testing.T, f *fixture, v *view) { wantNoLease(t, v, "held") },
		},
		{
			// cancel of the last lease of a retiring generation: the
			// generation goes with it once the daemon restarts.
			name: "cancel-committed/retiring", via: viaMount,
			setup: func(t *testing.T, f *fixture) {
				f.tree(t, "mv", "MNT/generations/"+g1, "MNT/tombstones/")
				f.tree(t, "rmdir", "MNT/tombstones/"+g1)
			},
			op:     cancel("held", "MNT/retiring/"+g1+"/leases/held"),
			before: []string{store.ProblemRetirementPending},
			check: func(t *testing.T, f *fixture, v *view) {
				wantNoLease(t, v, "held")
				wantGens(t, v, map[string]store.GenerationState{})
			},
		},
	}
}
