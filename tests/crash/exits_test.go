//go:build linux

package crash

import (
	"os"
	"strings"
	"testing"
	"time"

	"templatefs/store"
	"templatefs/tests/harness"
)

// exitScenarios are TestCrash's rows for exit tracking's kill point: a
// real bound process exits and the daemon dies right after committing
// the exit, either while watching the process or at its start.
func exitScenarios() []scenario {
	exitedHeld := func(t *testing.T, f *fixture, v *view) {
		wantLease(t, v, "held", g1, store.Exited)
		settleHeld(t, f)
	}
	return []scenario{
		{
			name: "exit-recorded/watched", via: viaMount,
			setup: func(t *testing.T, f *fixture) { f.bindLive(t, "held") },
			op: func(t *testing.T, f *fixture, fp string) {
				d := f.mountArmed(t, fp)
				f.proc.Process.Kill()
				f.proc.Wait()
				died := d.Wait(deathTimeout)
				d.Detach()
				if !died.Killed() {
					t.Fatalf("daemon with %s armed, after its bound process exited: %v; want killed by SIGKILL", fp, died)
				}
			},
			check: exitedHeld,
		},
		{
			// The daemon records the exit before it mounts, and dies.
			name: "exit-recorded/start", via: viaMount,
			setup: func(t *testing.T, f *fixture) { f.bindExited(t, "held") },
			op: func(t *testing.T, f *fixture, fp string) {
				f.cliArmed(t, fp, "mount", f.store, f.mnt)
			},
			check: exitedHeld,
		},
	}
}

// settleHeld removes the exited lease "held" through the mount with rm.
func settleHeld(t *testing.T, f *fixture) {
	t.Helper()
	harness.MustTool(t, "rm", f.path("leases", "held"))
	if _, err := os.Lstat(f.path("leases", "held")); err == nil {
		t.Error("leases/held is still there after rm")
	}
	f.released["held"] = true
}

// TestExitFaultThroughMount arms the error point of the exit's commit in
// a real daemon: when the bound process exits, the commit fails, the
// lease stays bound, and the store goes read-only and says so. The daemon
// is SIGKILLed; fsck finds the store clean, and the next daemon records
// the exit at its start.
func TestExitFaultThroughMount(t *testing.T) {
	harness.RequireFUSE(t)
	tmpl := template(t, t.TempDir())
	for _, spec := range []string{"exit-commit:EIO", "exit-commit:ENOSPC"} {
		t.Run(spec, func(t *testing.T) {
			f := tmpl.copyTemplate(t)
			f.bindLive(t, "held")
			d := f.mountArmed(t, spec)
			f.proc.Process.Kill()
			f.proc.Wait()
			_, errno, _ := strings.Cut(spec, ":")
			strerr := map[string]string{"EIO": ioError, "ENOSPC": noSpace}[errno]
			waitFor(t, "the daemon to report the failed commit", func() bool {
				return strings.Contains(strings.ToLower(harness.MustTool(t, "cat", f.path("store"))), strings.ToLower(strerr))
			})
			if l := f.look(t).leases["held"]; l.State != string(store.Bound) {
				t.Errorf("held after the failed exit commit: %+v, want bound", l)
			}
			if log := d.Log(); !strings.Contains(log, "exit not recorded") {
				t.Errorf("daemon log does not say the exit was not recorded:\n%s", log)
			}
			d.Kill()
			if got := f.fsckKinds(t); len(got) != 0 {
				t.Errorf("fsck after the kill found %q", got)
			}

			d = f.mount(t)
			v := f.look(t)
			f.checkInvariants(t, v)
			wantLease(t, v, "held", g1, store.Exited)
			settleHeld(t, f)
			d.Stop()
			if got := f.fsckKinds(t, "--digests"); len(got) != 0 {
				t.Errorf("fsck after the restart found %q", got)
			}
		})
	}
}

// exitBound bounds the wait for a daemon to act on a process's exit:
// generous, it only catches hangs (2 noisy cores, -race).
const exitBound = 20 * time.Second

// waitFor polls cond until it holds, failing the test after exitBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(exitBound); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", exitBound, what)
		}
	}
}
