//go:build linux

package conformance

import (
	"os"
	"strconv"
	"testing"
	"time"

	"templatefs/store"
	"templatefs/tests/harness"
)

// exitBound bounds the wait for an exit to show: generous, it only
// catches hangs (2 noisy cores, -race).
const exitBound = 20 * time.Second

// testExitTracking binds c1 to a real process through the mount, with
// exit tracking running as the daemon runs it, and kills the process: the
// lease file shows state exited and the time with no rm, its size agrees
// with its content, it stays listed, and rm settles it.
func testExitTracking(t *testing.T, b Backend) {
	e := newEnv(t, b)
	t.Cleanup(e.st.TrackExits())
	sleep := harness.Sleeper(t)
	e.echo("pid "+strconv.Itoa(sleep.Process.Pid), "leases/c1")
	sleep.Process.Kill()
	sleep.Wait()
	var l store.Lease
	for deadline := time.Now().Add(exitBound); ; time.Sleep(10 * time.Millisecond) {
		if l = e.leaseFile("generations/g000001/leases/c1"); l.State == store.Exited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease c1 still %s %v after its process was killed", l.State, exitBound)
		}
	}
	if l.ExitedAt.IsZero() || l.Exit != "exited" || l.Process == nil || l.Process.PID != sleep.Process.Pid {
		t.Errorf("exited lease file: %+v", l)
	}
	if st := e.lstat("leases/c1"); st.Size != int64(len(e.read("leases/c1"))) {
		t.Errorf("stat of the exited lease: size %d, content %d bytes", st.Size, len(e.read("leases/c1")))
	}
	e.wantListed("generations/g000001/leases", "c1")
	if err := os.Remove(e.path("keys/" + e.gens[0].KeyID + "/leases/c1")); err != nil {
		t.Fatalf("rm of the exited lease: %v", err)
	}
	e.wantGone("leases/c1")
	e.wantGone("generations/g000001/leases/c1")
}
