//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/tests/harness"
)

func mounted(t *testing.T, srv *fuse.Server, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Error(err)
		}
	})
}

// ls runs the real ls -1 on dir and returns the names it printed.
func ls(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("ls", "-1", dir).Output()
	if err != nil {
		t.Fatalf("ls %s: %v", dir, err)
	}
	return strings.Fields(string(out))
}

// TestMemListsItsFiles mounts the in-memory ceiling and lists it with the
// real ls -l; its extended attributes are off (EOPNOTSUPP from the kernel).
func TestMemListsItsFiles(t *testing.T) {
	harness.RequireFUSE(t)
	mnt := t.TempDir()
	const n = 300
	srv, err := mountMem(mnt, n)
	mounted(t, srv, err)

	var want []string
	for i := range n {
		want = append(want, memName(i))
	}
	if got := ls(t, mnt); !slices.Equal(got, want) {
		t.Errorf("ls lists %d names %q..., want %d", len(got), got[:min(3, len(got))], n)
	}
	out, err := exec.Command("ls", "-l", mnt).Output()
	if err != nil {
		t.Fatalf("ls -l: %v", err)
	}
	if lines := strings.Count(string(out), "\n-r--r--r-- "); lines != n {
		t.Errorf("ls -l shows %d read-only files, want %d:\n%.300s", lines, n, out)
	}
	_, err = unix.Getxattr(filepath.Join(mnt, memName(7)), "security.selinux", make([]byte, 64))
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("getxattr: %v, want %v", err, unix.EOPNOTSUPP)
	}
}

// TestLoopbackCreates mounts the loopback ceiling over a directory and
// creates files through it as the bench does (open O_CREAT|O_EXCL, close):
// they are listed through the mount and in the directory itself.
func TestLoopbackCreates(t *testing.T) {
	harness.RequireFUSE(t)
	mnt, dir := t.TempDir(), t.TempDir()
	srv, err := mountLoopback(mnt, dir)
	mounted(t, srv, err)

	var want []string
	for i := range 20 {
		name := fmt.Sprintf("c-%02d", i)
		fd, err := unix.Open(filepath.Join(mnt, name), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Close(fd); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if _, err := unix.Open(filepath.Join(mnt, want[0]), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644); !errors.Is(err, unix.EEXIST) {
		t.Errorf("second O_EXCL create of %s: %v, want EEXIST", want[0], err)
	}
	if got := ls(t, mnt); !slices.Equal(got, want) {
		t.Errorf("through the mount: %q, want %q", got, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var backing []string
	for _, e := range entries {
		backing = append(backing, e.Name())
	}
	if !slices.Equal(backing, want) {
		t.Errorf("in %s: %q, want %q", dir, backing, want)
	}
}
