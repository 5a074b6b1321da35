//go:build linux

package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"templatefs/store"
)

// launched starts, with TEMPLATEFS_LAUNCH_ID=launch in its environment,
// sh -c script (args as $1...): the way an orchestrator starts a clone
// with its lease's launch ID. A cleanup kills and reaps it.
func launched(t *testing.T, launch, script string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Env = append(os.Environ(), store.LaunchEnv+"="+launch)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// waitLease polls `cat rel` until the lease is in state want; the bound
// only catches a hang.
func (e *env) waitLease(rel string, want store.LeaseState) store.Lease {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := e.leaseFile(rel)
		if l.State == want {
			return l
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s still %s, want %s: %+v", rel, l.State, want, l)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testLaunchBind: a process started with the launch ID from `cat
// leases/<clone>` binds its lease by opening memory.bin; a reader without
// it, or of another generation's payload, binds nothing; a generation
// that may no longer be restored refuses the open with EPERM and a log
// line, and the lease stays reserved.
func testLaunchBind(t *testing.T, b Backend) {
	e := newEnv(t, b)
	l := e.leaseFile("leases/c1")
	if l.State != store.Reserved || len(l.LaunchID) != 32 {
		t.Fatalf("cat leases/c1: %+v; want reserved with a launch ID", l)
	}
	if out, err := exec.Command("cat", e.path("generations/g000001/payload/memory.bin")).Output(); err != nil || len(out) != 64<<20 {
		t.Fatalf("cat memory.bin without a launch ID: %d bytes, %v", len(out), err)
	}
	other := launched(t, l.LaunchID, `exec cat "$1" >/dev/null`, e.path("generations/g000002/payload/memory.bin"))
	if err := other.Wait(); err != nil {
		t.Fatalf("cat of another generation's payload with c1's launch ID: %v", err)
	}
	if got := e.leaseFile("leases/c1"); got.State != store.Reserved {
		t.Fatalf("lease after opens that bind nothing: %+v", got)
	}

	// The shell opens memory.bin, then becomes sleep: the same process.
	clone := launched(t, l.LaunchID, `exec 3<"$1" && exec sleep 600`, e.path("generations/g000001/payload/memory.bin"))
	bound := e.waitLease("leases/c1", store.Bound)
	if bound.Process == nil || bound.Process.PID != clone.Process.Pid || bound.BoundAt.IsZero() {
		t.Fatalf("cat leases/c1 after the open: %+v; want bound to pid %d", bound, clone.Process.Pid)
	}
	if got := e.leaseFile("keys/" + e.gens[0].KeyID + "/leases/c1"); got.State != store.Bound || got.Process.PID != clone.Process.Pid {
		t.Errorf("the key's name of the lease: %+v", got)
	}
	// A second open by a process with the launch ID leaves the lease as it is.
	again := launched(t, l.LaunchID, `exec cat "$1" >/dev/null`, e.path("generations/g000001/payload/state.bin"))
	if err := again.Wait(); err != nil {
		t.Errorf("second open with the launch ID: %v", err)
	}
	if got := e.leaseFile("leases/c1"); got.State != store.Bound || got.Process.PID != clone.Process.Pid || !got.BoundAt.Equal(bound.BoundAt) {
		t.Errorf("lease after a second open: %+v; want it unchanged", got)
	}
	wantErrno(t, "rm while the launched process runs", os.Remove(e.path("leases/c1")), syscall.EBUSY)
	clone.Process.Kill()
	clone.Wait()
	if err := os.Remove(e.path("leases/c1")); err != nil {
		t.Fatalf("rm after the launched process exited: %v", err)
	}
	e.wantGone("leases/c1")

	t.Run("ineligible", func(t *testing.T) {
		if err := create(e, "generations/g000002/leases/c2"); err != nil {
			t.Fatal(err)
		}
		c2 := e.leaseFile("leases/c2")
		if out, err := exec.Command("mv", e.path("generations/g000002"), e.path("tombstones/g000002")).CombinedOutput(); err != nil {
			t.Fatalf("mv to tombstones: %v: %s", err, out)
		}
		cmd := exec.Command("cat", e.path("tombstones/g000002/payload/memory.bin"))
		cmd.Env = append(os.Environ(), store.LaunchEnv+"="+c2.LaunchID)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Operation not permitted") {
			t.Errorf("cat of a tombstoned payload with the lease's launch ID: %v: %s; want Operation not permitted", err, out)
		}
		if got := e.leaseFile("leases/c2"); got.State != store.Reserved {
			t.Errorf("lease after the refused open: %+v; want reserved", got)
		}
		if log := e.log.String(); !strings.Contains(log, "op=open") || !strings.Contains(log, "errno=EPERM") || !strings.Contains(log, "tombstoned") {
			t.Errorf("no log line with the refused open's reason:\n%s", log)
		}
		if out, err := exec.Command("cat", e.path("tombstones/g000002/payload/state.bin")).Output(); err != nil || len(out) == 0 {
			t.Errorf("cat of the tombstoned payload without a launch ID: %v", err)
		}
	})
}

// testReservedLeaseStays: rm, kill and mv out of the mount (of the lease,
// and of its generation) leave a reserved lease in place; cancel is
// refused while a process carries its launch ID, then ends it.
func testReservedLeaseStays(t *testing.T, b Backend) {
	e := newEnv(t, b)
	l := e.leaseFile("leases/c1")
	out, err := exec.Command("rm", e.path("leases/c1")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Device or resource busy") {
		t.Errorf("rm leases/c1: %v: %s; want Device or resource busy", err, out)
	}
	wantErrno(t, "rm of a reserved lease", os.Remove(e.path("generations/g000001/leases/c1")), syscall.EBUSY)
	if status := e.read("generations/g000001/status"); !strings.Contains(status, " unlink c1 EBUSY: ") || !strings.Contains(status, "write cancel") {
		t.Errorf("status lacks the refused rm:\n%s", status)
	}
	wantErrno(t, "kill of a reserved lease", e.writeCmd("leases/c1", "kill\n"), syscall.EBUSY)

	// mv out of the mount: rename(2) is EXDEV, so mv copies and then
	// unlinks, which is refused.
	outside := t.TempDir()
	if out, err := exec.Command("mv", e.path("leases/c1"), outside).CombinedOutput(); err == nil {
		t.Errorf("mv leases/c1 out of the mount succeeded: %s", out)
	}
	if out, err := exec.Command("mv", e.path("generations/g000001"), outside).CombinedOutput(); err == nil {
		t.Errorf("mv generations/g000001 out of the mount succeeded: %s", out)
	}
	if _, err := os.Stat(filepath.Join(outside, "g000001", "leases", "c1")); err != nil {
		t.Logf("mv copied no lease file out: %v", err)
	}
	if got := e.leaseFile("leases/c1"); got != l {
		t.Errorf("lease after rm, kill and mv: %+v; want %+v", got, l)
	}
	if rec, err := e.st.Lease("c1"); err != nil || rec.State != store.Reserved || e.state(0) != store.Published {
		t.Errorf("store after rm, kill and mv: %+v, %v, %s", rec, err, e.state(0))
	}
	e.wantListed("generations/g000001/leases", "c1")

	carrier := launched(t, l.LaunchID, `exec sleep 600`)
	wantErrno(t, "cancel while a process carries the launch ID", e.writeCmd("leases/c1", "cancel\n"), syscall.EBUSY)
	if out, err := e.sh(`env echo cancel > "$1"`, e.path("leases/c1")); err == nil || !strings.Contains(out, "Device or resource busy") {
		t.Errorf("echo cancel while pid %d carries the launch ID: %v: %s", carrier.Process.Pid, err, out)
	}
	if got := e.leaseFile("leases/c1"); got.State != store.Reserved {
		t.Fatalf("lease after the refused cancel: %+v", got)
	}
	carrier.Process.Kill()
	carrier.Wait()
	e.echo("cancel", "leases/c1")
	e.wantGone("leases/c1")
	e.wantGone("generations/g000001/leases/c1")
	if _, err := e.st.Lease("c1"); err == nil {
		t.Errorf("store still has c1 after cancel")
	}
}
