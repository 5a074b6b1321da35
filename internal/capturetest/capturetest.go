// Package capturetest makes valid capture directories for tests: a sample
// manifest with random state.bin and a sparse memory.bin.
package capturetest

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"templatefs/store/manifest"
)

// MemoryDataBlock is the length of each data block Make writes into
// memory.bin; the rest of the file is a hole.
const MemoryDataBlock = 4096

// Make writes a new capture directory below dir and returns its path. It
// holds manifest.bin (manifest.Encode of manifest.Sample(o), which must
// validate), state.bin (StateSizeBytes random bytes) and memory.bin
// (MemorySizeBytes long, made by Truncate, with random MemoryDataBlock
// blocks at the start, the middle and the end, so it is sparse). Failures
// end the test.
func Make(t testing.TB, dir string, o manifest.SampleOptions) string {
	t.Helper()
	m := manifest.Sample(o)
	if err := m.Validate(); err != nil {
		t.Fatalf("capturetest: sample manifest: %v", err)
	}
	capture, err := os.MkdirTemp(dir, "capture-")
	if err != nil {
		t.Fatalf("capturetest: %v", err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(capture, name), data, 0o600); err != nil {
			t.Fatalf("capturetest: %v", err)
		}
	}
	write(manifest.ManifestFileName, manifest.Encode(m))
	write(manifest.StateFileName, random(int(m.StateSizeBytes)))

	mem, err := os.OpenFile(filepath.Join(capture, manifest.MemoryFileName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatalf("capturetest: %v", err)
	}
	defer mem.Close()
	size := int64(m.MemorySizeBytes)
	if err := mem.Truncate(size); err != nil {
		t.Fatalf("capturetest: truncate %s to %d: %v", mem.Name(), size, err)
	}
	for _, off := range []int64{0, size / 2, size - MemoryDataBlock} {
		off = max(0, off&^(MemoryDataBlock-1))
		n := min(MemoryDataBlock, size-off)
		if _, err := mem.WriteAt(random(int(n)), off); err != nil {
			t.Fatalf("capturetest: write %s at %d: %v", mem.Name(), off, err)
		}
	}
	if err := mem.Close(); err != nil {
		t.Fatalf("capturetest: %v", err)
	}
	return capture
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
