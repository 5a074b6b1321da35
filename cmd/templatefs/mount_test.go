//go:build linux

package main

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"templatefs/tests/harness"
)

// TestCheckMountpoint: a file, a directory inside the store and a missing
// path are refused before any mount(2); a plain directory passes.
func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	file := filepath.Join(dir, "file")
	for _, p := range []string{storeDir, filepath.Join(storeDir, "payload"), filepath.Join(dir, "mnt")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mnt, want string
	}{
		{file, "not a directory"},
		{filepath.Join(storeDir, "payload"), "inside the store"},
		{storeDir, "inside the store"},
		{filepath.Join(dir, "missing"), "no such file"},
		{filepath.Join(dir, "mnt"), ""},
		{"/proc", "already has a file system mounted"},
	}
	// store.Open resolves links above the store; a mountpoint reached
	// through one is still seen inside it.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct{ mnt, want string }{filepath.Join(link, "store", "payload"), "inside the store"})
	for _, tt := range tests {
		err := checkMountpoint(tt.mnt, storeDir)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkMountpoint(%s): %v, want %q", tt.mnt, err, tt.want)
		}
	}
}

// TestMountFailureSaysWhatToDo runs `templatefs mount` as the user nobody
// on a mountpoint nobody may not write, so the fusermount3 helper refuses
// the mount (no access to /dev/fuse or to the mountpoint): the error names
// the helper, its exit status (not go-fuse's raw wait status "code 256")
// and what to check.
func TestMountFailureSaysWhatToDo(t *testing.T) {
	if os.Geteuid() != 0 {
		harness.SkipOrFail(t, "running templatefs as nobody needs root")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		harness.SkipOrFail(t, "no fusermount3 (Debian package fuse3): %v", err)
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		harness.SkipOrFail(t, "no user nobody: %v", err)
	}
	uid, _ := strconv.ParseUint(nobody.Uid, 10, 32)
	gid, _ := strconv.ParseUint(nobody.Gid, 10, 32)
	// A directory nobody can reach (t.TempDir's parent is private), with a
	// copy of the binary, a home owned by nobody and a mountpoint of root's.
	top, err := os.MkdirTemp("", "templatefs-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	home, mnt, bin := filepath.Join(top, "home"), filepath.Join(top, "mnt"), filepath.Join(top, "templatefs")
	for _, d := range []string{top, home, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(home, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(harness.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := func(args ...string) harness.Result {
		cmd := harness.Command(t, args...)
		cmd.Path, cmd.Dir = bin, home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		return harness.Exec(t, cmd)
	}
	storeDir := filepath.Join(home, "store")
	if r := asNobody("init", storeDir); r.Code != 0 {
		t.Fatalf("init as nobody: %v", r)
	}
	r := asNobody("mount", storeDir, mnt)
	want := "templatefs mount: mount " + mnt + ": fusermount3 failed (exit status 1; "
	if r.Code != 1 || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "/dev/fuse") || strings.Contains(r.Stderr, "code 256") {
		t.Errorf("mount as nobody on root's directory: %v\nwant exit 1 and %q, naming /dev/fuse", r, want)
	}
	if harness.IsMounted(t, mnt) {
		t.Errorf("%s is mounted after a refused mount", mnt)
	}
}
