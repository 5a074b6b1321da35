//go:build linux

// Package scale checks the mount's behaviour at size and its read modes:
// a leases directory of thousands of entries lists completely, in order,
// in pages, and rewinds; payloads read the same with and without FUSE
// passthrough, and the daemon logs which mode it uses.
package scale

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"templatefs/fs"
	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/leasefs"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
	"templatefs/tests/harness"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// publishedStore returns an open store with one published generation.
func publishedStore(t *testing.T) (*store.Store, store.Generation) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	class := templatekey.SampleClass()
	capture := capturetest.Make(t, t.TempDir(), manifest.SampleOptions{StateSizeBytes: 5000, MemorySizeBytes: 8 << 20, CaptureUTC: hostclock.Now()})
	g, err := st.Publish(capture, &class)
	if err != nil {
		t.Fatal(err)
	}
	return st, g
}

// mount mounts st with opts and unmounts at the end of the test.
func mount(t *testing.T, st *store.Store, opts fs.MountOptions) string {
	t.Helper()
	harness.RequireFUSE(t)
	lfs, err := leasefs.New(st, leasefs.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	srv, err := fs.Mount(mnt, lfs, opts)
	if err != nil {
		harness.SkipOrFail(t, "mount: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		srv.Wait()
	})
	return mnt
}

// TestReadModes: with and without passthrough every payload reads back
// with its recorded digest, and the mount logs the mode it chose.
func TestReadModes(t *testing.T) {
	for _, tt := range []struct {
		name string
		off  bool
	}{{"passthrough", false}, {"no-passthrough", true}} {
		t.Run(tt.name, func(t *testing.T) {
			st, g := publishedStore(t)
			var log harness.SyncBuffer
			mnt := mount(t, st, fs.MountOptions{NoPassthrough: tt.off, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			for _, a := range g.Artifacts {
				data, err := os.ReadFile(filepath.Join(mnt, "generations", g.ID.String(), "payload", a.Name))
				if err != nil {
					t.Fatal(err)
				}
				if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != a.SHA256 {
					t.Errorf("%s reads with sha256 %x, want %s", a.Name, sum, a.SHA256)
				}
			}
			line := log.String()
			if !strings.Contains(line, `msg="payload read mode"`) {
				t.Fatalf("no read mode line in the mount log:\n%s", line)
			}
			if tt.off && !strings.Contains(line, "mode="+fs.ReadBackingFd) {
				t.Errorf("passthrough turned off, log says:\n%s", line)
			}
			if !tt.off && !strings.Contains(line, "mode="+fs.ReadPassthrough) && !strings.Contains(line, "mode="+fs.ReadBackingFd) {
				t.Errorf("log names no known mode:\n%s", line)
			}
		})
	}
}

// TestListLeasesPaged: 3,000 leases (several dirPage pages) list
// completely, once each, in clone-ID order from leases/ and from the
// generation's leases/, and a rewound directory lists them all again.
func TestListLeasesPaged(t *testing.T) {
	const n = 3000
	st, g := publishedStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				if _, _, err := st.AcquireLease(g.ID, fmt.Sprintf("clone-%05d", i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("clone-%05d", i)
	}
	mnt := mount(t, st, fs.MountOptions{Logger: quiet})
	for _, dir := range []string{"leases", "generations/" + g.ID.String() + "/leases"} {
		t.Run(dir, func(t *testing.T) {
			f, err := os.Open(filepath.Join(mnt, dir))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			first, err := f.Readdirnames(700)
			if err != nil || !slices.Equal(first, want[:700]) {
				t.Fatalf("first 700 names: %d, %v", len(first), err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got, err := f.Readdirnames(-1)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("after rewind listed %d names (first %q), want %d in order", len(got), got[:min(3, len(got))], n)
			}
		})
	}
}
