package store

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"templatefs/internal/hostclock"
	"templatefs/internal/sample"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// TestReadOnlyRefusesChanges makes the store read-only, as damage found
// while open or a failed fsync does, and calls every state-changing
// method: each fails with ErrReadOnly naming the reason, the index file
// and the store's directories are byte for byte as they were, and reads
// (Check without Repair included) keep working. The first reason wins and
// is logged once.
func TestReadOnlyRefusesChanges(t *testing.T) {
	st, g := openLeaseStore(t)
	var logged bytes.Buffer
	st.log = slog.New(slog.NewTextHandler(&logged, nil))
	if _, _, err := st.AcquireLease(g.ID, "held"); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join(t.TempDir(), "capture")
	if err := sample.WriteCapture(capture, manifest.SampleOptions{MemorySizeBytes: 1 << 20, StateSizeBytes: 4096, VPCount: 2,
		CaptureUTC: hostclock.Now().Add(-time.Hour), CaptureMonotonicNs: 5e9}, 2); err != nil {
		t.Fatal(err)
	}
	if st.ReadOnly() != nil {
		t.Fatalf("a new store is read-only: %v", st.ReadOnly())
	}
	st.setReadOnly(errors.New("fsync index.db: input/output error"))
	st.setReadOnly(errors.New("a later reason"))
	ro := st.ReadOnly()
	if !errors.Is(ro, ErrReadOnly) || !strings.Contains(ro.Error(), "since ") || !strings.Contains(ro.Error(), "fsync index.db: input/output error") {
		t.Fatalf("ReadOnly = %v, want ErrReadOnly naming the first reason and when", ro)
	}
	if n := strings.Count(logged.String(), "store is read-only from now on"); n != 1 {
		t.Errorf("read-only logged %d times, want once:\n%s", n, logged.String())
	}
	snapshot := func() map[string][]byte {
		files := map[string][]byte{}
		filepath.WalkDir(st.dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if rel, _ := filepath.Rel(st.dir, p); rel != LockFile && !d.IsDir() {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				files[rel] = b
			} else if d.IsDir() {
				files[rel+"/"] = nil
			}
			return nil
		})
		return files
	}
	before := snapshot()
	class := templatekey.SampleClass()
	for name, change := range map[string]func() error{
		"publish":          func() error { _, err := st.Publish(capture, &class); return err },
		"acquire":          func() error { _, _, err := st.AcquireLease(g.ID, "new"); return err },
		"acquire by key":   func() error { _, _, err := st.AcquireLeaseByKey(g.KeyID, "new"); return err },
		"bind":             func() error { _, err := st.BindLease("held", os.Getppid()); return err },
		"cancel":           func() error { return st.CancelLease("held") },
		"kill":             func() error { return st.KillLease("held", time.Second) },
		"tombstone":        func() error { _, err := st.Tombstone(g.ID, 1); return err },
		"lift":             func() error { _, err := st.Lift(g.ID); return err },
		"retire":           func() error { _, err := st.Retire(g.ID, 1); return err },
		"settings":         func() error { return st.SetSettings(DefaultSettings()) },
		"check and repair": func() error { _, err := st.Check(CheckOptions{Repair: true}); return err },
	} {
		if err := change(); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "input/output error") {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly with the reason", name, err)
		}
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Errorf("store holds %d files and directories after the refusals, %d before", len(after), len(before))
	}
	for name, b := range before {
		if a, ok := after[name]; !ok || !bytes.Equal(a, b) {
			t.Errorf("%s changed by a refused change", name)
		}
	}
	if problems, err := st.Check(CheckOptions{}); err != nil || len(problems) > 0 {
		t.Errorf("Check on a read-only store = %v, %v; want it to work and find nothing", problems, err)
	}
	if _, err := st.Lease("held"); err != nil {
		t.Errorf("read on a read-only store: %v", err)
	}
}
