//go:build linux && cgo && fuse3

package winfsp

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"templatefs/leasefs"
	"templatefs/store"
)

// TestServe serves an empty store, reads its store file through the
// mount, and checks that SIGTERM unmounts it and makes Serve return nil.
func TestServe(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("TEMPLATEFS_REQUIRE_FUSE") == "1" {
			t.Fatalf("needs root and /dev/fuse: %v", err)
		}
		t.Skipf("needs root and /dev/fuse: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(dir, store.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lfs, err := leasefs.New(st, leasefs.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	ready, served := make(chan struct{}), make(chan error, 1)
	go func() { served <- Serve(mnt, lfs, MountOptions{}, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("Serve: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(mnt, "store")); err != nil || len(data) == 0 {
		t.Fatalf("read store through the mount: %q, %v", data, err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still serving 10s after SIGTERM")
	}
	if _, err := os.Stat(filepath.Join(mnt, "store")); !os.IsNotExist(err) {
		t.Errorf("store still visible after Serve returned: %v", err)
	}
}
