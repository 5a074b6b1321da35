package leasefs

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"templatefs/store"
)

// startSleep starts a sleep process; cleanup kills and reaps it.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestLeaseProcess binds a lease to a real process, is refused its
// release while it runs, and kills it through the lease file.
func TestLeaseProcess(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	sleep := startSleep(t)
	pid := "pid " + strconv.Itoa(sleep.Process.Pid) + "\n"
	if err := write("leases/c1", pid)(fx); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if err := leaseState("c1", store.Bound)(fx); err != nil {
		t.Fatal(err)
	}
	if err := write("generations/g000001/leases/c1", pid)(fx); err != nil {
		t.Errorf("bind again to the same process: %v", err)
	}
	second := startSleep(t)
	if err := write("leases/c1", "pid "+strconv.Itoa(second.Process.Pid))(fx); ToErrno(err) != EBUSY {
		t.Errorf("bind to another process: %v, want EBUSY", err)
	}
	if err := remove("keys/KEY/leases/c1")(fx); ToErrno(err) != EBUSY {
		t.Errorf("rm of a live bound lease: %v, want EBUSY", err)
	}
	if err := all(leaseState("c1", store.Bound), refused(1, "unlink c1 EBUSY"))(fx); err != nil {
		t.Error(err)
	}
	if err := as(other, write("leases/c1", "kill"))(fx); ToErrno(err) != EACCES {
		t.Errorf("kill as other: %v, want EACCES", err)
	}
	if err := sleep.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("process gone after refused kill: %v", err)
	}
	start := time.Now()
	if err := write("leases/c1", "kill\n")(fx); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if d := time.Since(start); d >= DefaultKillWait {
		t.Errorf("kill took %v", d)
	}
	if err := noLease("c1")(fx); err != nil {
		t.Error(err)
	}
	if state, err := sleep.Process.Wait(); err != nil || !state.Sys().(syscall.WaitStatus).Signaled() {
		t.Errorf("sleep after kill: %v, %v", state, err)
	}
}
