package store

import (
	"errors"
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

// TestPublishRefusesChangingCapture changes a capture while Publish copies
// it, at a known moment: afterCopyHook runs where the fail point
// publish-copied-<artifact> is, in the publishing goroutine, so the write
// lands between the start and the end of the copy every time. The
// capture's times are first set an hour back, so the write moves mtime
// even within one tick of the kernel's coarse clock. Each case must be
// refused with ErrCaptureChanged naming the artifact and what changed,
// leave no generation and no staging or payload directory, and burn the
// reserved ID.
func TestPublishRefusesChangingCapture(t *testing.T) {
	overwrite := func(path string) error { // same size, new bytes
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteAt([]byte("torn"), 4096)
		return err
	}
	grow := func(path string) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.Write([]byte("more"))
		return err
	}
	tests := []struct {
		name, after, target string
		change              func(string) error
		want                string
	}{
		{"memory.bin written before its copy", manifest.StateFileName, manifest.MemoryFileName, overwrite, "memory.bin: mtime "},
		{"memory.bin written after its copy", manifest.MemoryFileName, manifest.MemoryFileName, overwrite, "memory.bin: mtime "},
		{"state.bin grown after its copy", manifest.MemoryFileName, manifest.StateFileName, grow, "state.bin: size 5000, then 5004"},
		{"manifest.bin rewritten in place after its copy", manifest.ManifestFileName, manifest.ManifestFileName, overwriteFirstByte, "manifest.bin: mtime "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			capture := filepath.Join(t.TempDir(), "capture")
			o := manifest.SampleOptions{StateSizeBytes: 5000, MemorySizeBytes: 16 << 20, CaptureUTC: hostclock.Now()}
			if err := sample.WriteCapture(capture, o, 1); err != nil {
				t.Fatal(err)
			}
			hourAgo := time.Now().Add(-time.Hour)
			for _, name := range []string{manifest.ManifestFileName, manifest.StateFileName, manifest.MemoryFileName} {
				if err := os.Chtimes(filepath.Join(capture, name), hourAgo, hourAgo); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(t.TempDir(), "store")
			if err := Init(dir); err != nil {
				t.Fatal(err)
			}
			st, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			changed := false
			afterCopyHook = func(artifact string) {
				if artifact == tt.after && !changed {
					changed = true
					if err := tt.change(filepath.Join(capture, tt.target)); err != nil {
						t.Error(err)
					}
				}
			}
			t.Cleanup(func() { afterCopyHook = nil })
			class := templatekey.SampleClass()
			_, err = st.Publish(capture, &class)
			if !errors.Is(err, ErrCaptureChanged) || !strings.Contains(err.Error(), "capture changed while it was read: "+tt.want) ||
				!strings.HasSuffix(err.Error(), "; publish it again once nothing writes to it") {
				t.Fatalf("Publish of a capture changed during the copy: %v; want ErrCaptureChanged naming %q and saying what to do", err, tt.want)
			}
			if gens, err := st.Generations(); err != nil || len(gens) != 0 {
				t.Errorf("generations %v (%v) after the refusal, want none", gens, err)
			}
			for _, sub := range []string{PayloadDir, StagingDir} {
				if entries, err := os.ReadDir(filepath.Join(dir, sub)); err != nil || len(entries) != 0 {
					t.Errorf("%s holds %v (%v) after the refusal, want nothing", sub, entries, err)
				}
			}
			afterCopyHook = nil
			fresh := filepath.Join(t.TempDir(), "capture")
			if err := sample.WriteCapture(fresh, o, 1); err != nil {
				t.Fatal(err)
			}
			g, err := st.Publish(fresh, &class)
			if err != nil {
				t.Fatal(err)
			}
			if g.ID != 2 {
				t.Errorf("next publication is %s, want g000002: the refused one's ID stays burned", g.ID)
			}
		})
	}
}

// overwriteFirstByte rewrites the first byte of the file at path with
// another value, keeping its size.
func overwriteFirstByte(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 0); err != nil {
		return err
	}
	_, err = f.WriteAt([]byte{b[0] ^ 0xff}, 0)
	return err
}
