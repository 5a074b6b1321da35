//go:build unix

package manifest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeCapture writes a capture of m into a new directory: manifest.bin,
// then each artifact as a sparse file of its declared size.
func writeCapture(t *testing.T, m *Manifest) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFileName), Encode(m), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, a := range m.Artifacts() {
		writeSized(t, filepath.Join(dir, a.Name), a.Size)
	}
	return dir
}

func writeSized(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(entries)
}

func TestOpenCapture(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     *Manifest
		files []string
	}{
		{"v6 microVM", Sample(sampleOptions(6)), []string{ManifestFileName, StateFileName, MemoryFileName}},
		{"v5 microVM", Sample(sampleOptions(5)), []string{ManifestFileName, StateFileName, MemoryFileName}},
		{"v5 standard", standardManifest(5), []string{ManifestFileName, StateFileName, MemoryFileName}},
		{"paired scratch", withScratch(Sample(sampleOptions(6)), "workload-start", "clone", true),
			[]string{ManifestFileName, StateFileName, MemoryFileName, ScratchFileName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeCapture(t, tc.m)
			c, err := OpenCapture(dir, sampleNow)
			if err != nil {
				t.Fatalf("OpenCapture: %v", err)
			}
			defer c.Close()
			want := Encode(tc.m)
			if !bytes.Equal(c.ManifestBytes, want) || c.Manifest.Version != tc.m.Version || c.Dir != dir {
				t.Errorf("capture = %q, version %d, %d manifest bytes; want %q, %d, %d", c.Dir, c.Manifest.Version, len(c.ManifestBytes), dir, tc.m.Version, len(want))
			}
			var names []string
			for _, f := range c.Files {
				names = append(names, f.Name)
				st, err := f.File.Stat()
				if err != nil || st.Size() != f.Size || !st.Mode().IsRegular() {
					t.Errorf("%s: stat %v, size %d, recorded %d", f.Name, err, st.Size(), f.Size)
				}
			}
			if !slices.Equal(names, tc.files) {
				t.Errorf("files = %v, want %v", names, tc.files)
			}
			if c.Files[0].Size != int64(len(want)) {
				t.Errorf("manifest.bin size %d, want %d", c.Files[0].Size, len(want))
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestOpenCaptureRefuses(t *testing.T) {
	sample := func() *Manifest { return Sample(sampleOptions(6)) }
	for _, tc := range []struct {
		name    string
		m       *Manifest
		damage  func(t *testing.T, dir string) string // returns the path to open
		want    error
		mention string
	}{
		{"extra file", sample(), func(t *testing.T, dir string) string {
			writeSized(t, filepath.Join(dir, "notes.txt"), 1)
			return dir
		}, ErrUnexpectedArtifact, `"notes.txt"`},
		{"extra directory", sample(), func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, ".hidden"), 0o700)
			return dir
		}, ErrUnexpectedArtifact, `".hidden"`},
		{"unpaired scratch.img", sample(), func(t *testing.T, dir string) string {
			writeSized(t, filepath.Join(dir, ScratchFileName), 512)
			return dir
		}, ErrUnexpectedArtifact, `"scratch.img"`},
		{"resume.claim of a clone capture", sample(), func(t *testing.T, dir string) string {
			writeSized(t, filepath.Join(dir, ResumeClaimFileName), 24)
			return dir
		}, ErrUnexpectedArtifact, `"resume.claim"`},
		{"claimed resume capture", withScratch(sample(), "instance-checkpoint", "resume", true), func(t *testing.T, dir string) string {
			writeSized(t, filepath.Join(dir, ResumeClaimFileName), 24)
			return dir
		}, ErrUnexpectedArtifact, "already been claimed"},
		{"missing state.bin", sample(), func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, StateFileName))
			return dir
		}, ErrIncompleteCapture, "state.bin is missing"},
		{"missing manifest.bin", sample(), func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, ManifestFileName))
			return dir
		}, ErrIncompleteCapture, "manifest.bin is missing"},
		{"missing paired scratch.img", withScratch(sample(), "workload-start", "clone", true), func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, ScratchFileName))
			return dir
		}, ErrIncompleteCapture, "scratch.img is missing"},
		{"memory.bin short", sample(), func(t *testing.T, dir string) string {
			os.Truncate(filepath.Join(dir, MemoryFileName), 4096)
			return dir
		}, ErrArtifactSize, "memory.bin is 4096 bytes, manifest says 5368709120"},
		{"state.bin long", sample(), func(t *testing.T, dir string) string {
			os.Truncate(filepath.Join(dir, StateFileName), 4097)
			return dir
		}, ErrArtifactSize, "state.bin is 4097 bytes, manifest says 4096"},
		{"scratch.img wrong size", withScratch(sample(), "workload-start", "clone", true), func(t *testing.T, dir string) string {
			os.Truncate(filepath.Join(dir, ScratchFileName), 512)
			return dir
		}, ErrArtifactSize, "scratch.img is 512 bytes, manifest says 1048576"},
		{"state.bin symlink", sample(), func(t *testing.T, dir string) string {
			target := filepath.Join(filepath.Dir(dir), "elsewhere")
			os.Rename(filepath.Join(dir, StateFileName), target)
			os.Symlink(target, filepath.Join(dir, StateFileName))
			return dir
		}, ErrNotRegular, "state.bin is a symlink"},
		{"manifest.bin symlink", sample(), func(t *testing.T, dir string) string {
			target := filepath.Join(filepath.Dir(dir), "elsewhere")
			os.Rename(filepath.Join(dir, ManifestFileName), target)
			os.Symlink(target, filepath.Join(dir, ManifestFileName))
			return dir
		}, ErrNotRegular, "manifest.bin is a symlink"},
		{"state.bin directory", sample(), func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, StateFileName))
			os.Mkdir(filepath.Join(dir, StateFileName), 0o700)
			return dir
		}, ErrNotRegular, "state.bin is not a regular file"},
		{"memory.bin FIFO", sample(), func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, MemoryFileName))
			if err := syscall.Mkfifo(filepath.Join(dir, MemoryFileName), 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			return dir
		}, ErrNotRegular, "memory.bin is not a regular file"},
		{"directory symlink", sample(), func(t *testing.T, dir string) string {
			link := dir + "-link"
			os.Symlink(dir, link)
			return link
		}, ErrNotRegular, "a symlink or not a directory"},
		{"directory is a file", sample(), func(t *testing.T, dir string) string {
			return filepath.Join(dir, StateFileName)
		}, ErrNotRegular, "a symlink or not a directory"},
		{"manifest over 1 MiB", sample(), func(t *testing.T, dir string) string {
			// Zeros would decode as malformed: ErrTooLarge proves the size
			// was checked before decoding.
			writeSized(t, filepath.Join(dir, ManifestFileName), MaxManifestSize+1)
			return dir
		}, ErrTooLarge, "manifest.bin is 1048577 bytes, limit 1048576"},
		{"manifest malformed", sample(), func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, ManifestFileName), []byte{0x08}, 0o600)
			return dir
		}, ErrTruncated, "manifest.bin"},
		{"manifest unsupported version", standardManifest(7), func(t *testing.T, dir string) string { return dir },
			ErrUnsupportedVersion, "version 7"},
		{"empty manifest", sample(), func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, ManifestFileName), nil, 0o600)
			return dir
		}, ErrUnsupportedVersion, "version 0"},
		{"manifest from the host's future", func() *Manifest {
			o := sampleOptions(6)
			o.CaptureUTC = sampleNow.Add(MaxAheadOfHost + time.Second)
			return Sample(o)
		}(), func(t *testing.T, dir string) string { return dir }, ErrInvalid, "ahead of the host's clock"},
		{"missing directory", sample(), func(t *testing.T, dir string) string {
			return filepath.Join(dir, "absent")
		}, fs.ErrNotExist, "open directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.damage(t, writeCapture(t, tc.m))
			before := openFDs(t)
			c, err := OpenCapture(path, sampleNow)
			if !errors.Is(err, tc.want) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("OpenCapture = %v, want %v", err, tc.want)
			}
			if c != nil {
				t.Errorf("OpenCapture returned a capture with error %v", err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open before, %d after a refused open", before, after)
			}
		})
	}
}
