//go:build linux

package leasefs

import (
	"os"
	"os/exec"
	"testing"

	"templatefs/store"
)

// launched starts sleep(1) carrying clone's launch ID (store.LaunchEnv),
// as an orchestrator starts a clone, and returns its pid.
func (fx *fixture) launched(clone string) int {
	fx.t.Helper()
	l, err := fx.st.Lease(clone)
	if err != nil {
		fx.t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), store.LaunchEnv+"="+l.LaunchID)
	if err := cmd.Start(); err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestOpenBindsByLaunchID: a payload open by a process carrying a
// reserved lease's launch ID binds the lease before the open returns; an
// open of a generation that refuses the bind fails (EPERM) and leaves the
// lease reserved; a caller without a launch ID, or without a pid, binds
// nothing.
func TestOpenBindsByLaunchID(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	open := func(path string, pid int) error {
		h, err := fx.fs.Open(fx.walk(path), OpenFlags{}, Caller{UID: owner.UID, PID: pid})
		if h.File != nil {
			h.File.Close()
		}
		return err
	}
	pid := fx.launched("c1")
	if err := open("generations/g000001/payload/memory.bin", 0); err != nil {
		t.Fatal(err)
	}
	if err := open("generations/g000003/payload/memory.bin", pid); err != nil {
		t.Fatal(err)
	}
	if err := leaseState("c1", store.Reserved)(fx); err != nil {
		t.Fatalf("after opens of no lease's payload: %v", err)
	}
	if err := open("generations/g000001/payload/memory.bin", pid); err != nil {
		t.Fatalf("open by the launched process: %v", err)
	}
	if l, err := fx.st.Lease("c1"); err != nil || l.State != store.Bound || l.Process.PID != pid {
		t.Fatalf("lease c1 after the open: %+v, %v; want bound to pid %d", l, err, pid)
	}
	if err := open("generations/g000001/payload/state.bin", pid); err != nil {
		t.Errorf("second open by the bound process: %v", err)
	}

	refused := fx.launched("c2")
	if err := open("tombstones/g000002/payload/memory.bin", refused); ToErrno(err) != EPERM {
		t.Errorf("open of a tombstoned generation's payload by its reserved lease's process: %v (%v), want EPERM", ToErrno(err), err)
	}
	if err := leaseState("c2", store.Reserved)(fx); err != nil {
		t.Error(err)
	}
	if err := open("tombstones/g000002/payload/memory.bin", 0); err != nil {
		t.Errorf("open by a process without a launch ID: %v", err)
	}
}
