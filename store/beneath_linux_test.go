package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenWalk runs openBeneath's fallback for kernels without openat2
// (this kernel has it, so openBeneath never takes it here): a plain path
// opens; a symbolic link as a middle or last component is ELOOP; "..",
// "." and empty components are EXDEV.
func TestOpenWalk(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "payload", "g000001"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "payload", "g000001", "state.bin"), []byte("state"), 0o400); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"g000001", "payload/g000002"}, {"g000001/state.bin", "payload/link.bin"}} {
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	fd, err := openWalk(int(dir.Fd()), "payload/g000001/state.bin")
	if err != nil {
		t.Fatalf("openWalk of a plain path: %v", err)
	}
	f := os.NewFile(uintptr(fd), "state.bin")
	b := make([]byte, 5)
	if _, err := f.Read(b); err != nil || string(b) != "state" {
		t.Errorf("read %q, %v; want state", b, err)
	}
	f.Close()
	for rel, want := range map[string]error{
		"payload/g000002/state.bin":         unix.ELOOP,
		"payload/link.bin":                  unix.ELOOP,
		"payload/../payload/g000001":        unix.EXDEV,
		"payload/./g000001/state.bin":       unix.EXDEV,
		"payload//g000001/state.bin":        unix.EXDEV,
		"payload/g000001/state.bin/nothing": unix.ENOTDIR,
	} {
		if fd, err := openWalk(int(dir.Fd()), rel); !errors.Is(err, want) {
			if err == nil {
				unix.Close(fd)
			}
			t.Errorf("openWalk %s: %v, want %v", rel, err, want)
		}
	}
	if _, err := openBeneath(dir, "payload/g000002/state.bin"); !errors.Is(err, unix.ELOOP) {
		t.Errorf("openBeneath through a symlinked directory: %v, want ELOOP", err)
	}
	if _, err := openBeneath(dir, "../etc/passwd"); !errors.Is(err, unix.EXDEV) {
		t.Errorf("openBeneath of ../etc/passwd: %v, want EXDEV", err)
	}
}

// TestModeString: modes as ls -l prints them.
func TestModeString(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		fs.ModeDir | 0o770:                    "drwxrwx---",
		fs.ModeDir | fs.ModeSticky | 0o777:    "drwxrwxrwt",
		fs.ModeDir | fs.ModeSticky | 0o776:    "drwxrwxrwT",
		0o644:                                 "-rw-r--r--",
		fs.ModeSetuid | fs.ModeSetgid | 0o755: "-rwsr-sr-x",
		fs.ModeSetuid | 0o644:                 "-rwSr--r--",
		fs.ModeSymlink | 0o777:                "lrwxrwxrwx",
	} {
		if got := modeString(m); got != want {
			t.Errorf("modeString(%v) = %s, want %s", m, got, want)
		}
	}
}
