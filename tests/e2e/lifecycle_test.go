//go:build linux

package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"templatefs/tests/harness"
)

// TestMountOverDeadMount kills a daemon with SIGKILL, which leaves its
// mountpoint dead ("Transport endpoint is not connected"), then mounts
// again on it: the new daemon must detach the dead mount, say so in its
// log, and serve.
func TestMountOverDeadMount(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t)
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt)
	if err := syscall.Kill(d.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := d.Wait(harness.KillTimeout); !r.Killed() {
		t.Fatalf("daemon after SIGKILL: %v", r)
	}
	if _, err := os.Stat(s.mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the killed daemon's mountpoint: %v, want ENOTCONN", err)
	}

	d = harness.StartMount(t, s.store, s.mnt)
	if !strings.Contains(d.Log(), "dead mount") {
		t.Errorf("the new daemon did not log detaching the dead mount:\n%s", d.Log())
	}
	if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations"))); len(got) != 1 || got[0] != gen {
		t.Errorf("ls generations after remount: %q, want [%s]", got, gen)
	}
	d.Stop()
}

// TestStopWhenBusy sends SIGTERM while a file in the mount is open: the
// daemon must detach lazily (and log why), keep serving the open file,
// and exit once it is closed. With nothing open, the unmount is clean.
func TestStopWhenBusy(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t)
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt)
	f, err := os.Open(s.path("generations", gen, "payload", "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Kill(d.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(harness.StopTimeout)
	for harness.IsMounted(t, s.mnt) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if harness.IsMounted(t, s.mnt) {
		t.Fatal("SIGTERM with an open file: the mountpoint is still attached")
	}
	if !strings.Contains(d.Log(), "detaching lazily") {
		t.Errorf("no log line naming the lazy unmount and its reason:\n%s", d.Log())
	}
	buf := make([]byte, 4096)
	if n, err := f.ReadAt(buf, 0); err != nil || n != len(buf) {
		t.Errorf("read of the open payload after the lazy unmount: %d bytes, %v", n, err)
	}
	want, err := os.ReadFile(filepath.Join(s.capture, "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if string(buf) != string(want[:len(buf)]) {
		t.Error("the open payload returned other bytes after the lazy unmount")
	}
	f.Close()
	if r := d.Wait(harness.StopTimeout); r.Code != 0 || r.Killed() {
		t.Errorf("daemon after the last file closed: %v, want exit 0", r)
	}

	d = harness.StartMount(t, s.store, s.mnt)
	d.Stop()
	if !strings.Contains(d.Log(), "unmounting cleanly") {
		t.Errorf("SIGTERM with nothing open: no clean unmount in the log:\n%s", d.Log())
	}
}
