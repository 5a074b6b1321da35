//go:build linux

package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestMountsListsRoot(t *testing.T) {
	mounts, err := Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.Point == "/" && m.FSType != "" {
			return
		}
	}
	t.Errorf("Mounts() has no / among %d mounts", len(mounts))
}

func TestRunStatus(t *testing.T) {
	r := RunStatus(t)
	if r.Code != 2 || r.Signal != 0 || !strings.Contains(r.Stderr, "usage") {
		t.Errorf("templatefs without arguments: %v; want exit 2 with usage", r)
	}
}

// TestDaemonLifecycle starts a mount, kills it, checks the dead mount was
// detached by starting again on the same mountpoint, and stops it.
func TestDaemonLifecycle(t *testing.T) {
	RequireFUSE(t)
	dir := t.TempDir()
	store, mnt := filepath.Join(dir, "store"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	Run(t, "init", store)

	d := StartMount(t, store, mnt)
	if got := MountType(t, mnt); got != FSType {
		t.Fatalf("mount type %q, want %s", got, FSType)
	}
	if _, err := os.Stat(filepath.Join(mnt, "store")); err != nil {
		t.Fatalf("stat MNT/store: %v", err)
	}
	d.Kill()
	if IsMounted(t, mnt) {
		t.Fatal("Kill left the dead mount")
	}

	d = StartMount(t, store, mnt)
	if !strings.Contains(d.Log(), ReadyPrefix+store) {
		t.Errorf("StartMount returned before the daemon printed its ready line:\n%s", d.Log())
	}
	d.Stop()
	if IsMounted(t, mnt) {
		t.Error("Stop left the mount")
	}
	if r := d.Wait(time.Second); r.Code != 0 || r.Killed() {
		t.Errorf("stopped daemon ended with %v", r)
	}
}

// TestAbortConnection aborts a live daemon's FUSE connection, the way out
// for a daemon stuck in a request to its own mount: the server sees its
// device gone and exits, and fusectl is left as it was found.
func TestAbortConnection(t *testing.T) {
	RequireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("aborting a FUSE connection needs fusectl, which only root can mount")
	}
	dir := t.TempDir()
	store, mnt := filepath.Join(dir, "store"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	Run(t, "init", store)
	fusectlBefore := MountType(t, fusectl)
	d := StartMount(t, store, mnt)
	if err := abortConnection(t, d.Mountpoint); err != nil {
		t.Fatal(err)
	}
	if r := d.Wait(KillTimeout); r.Killed() {
		t.Errorf("daemon after its connection was aborted: %v", r)
	}
	d.Detach()
	if IsMounted(t, mnt) {
		t.Error("the aborted mount is still there after Detach")
	}
	if got := MountType(t, fusectl); got != fusectlBefore {
		t.Errorf("%s is mounted as %q after the abort, was %q", fusectl, got, fusectlBefore)
	}
}
