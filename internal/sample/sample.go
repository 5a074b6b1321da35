// Package sample writes valid microVM captures and capture classes for
// `templatefs sample-capture`, `templatefs demo` and tests.
package sample

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// DataStride is the spacing of the non-zero blocks written into memory.bin:
// one DataBlock-sized block at offset 0 and at every DataStride after it, so
// the file is sparse with some real data.
const (
	DataStride = 64 << 20
	DataBlock  = 1 << 20
)

// WriteCapture writes a capture directory dir (created, mode 0700) holding
// manifest.bin (manifest.Sample(o), encoded), state.bin (o.StateSizeBytes
// pseudo-random bytes) and a sparse memory.bin of o.MemorySizeBytes with
// non-zero blocks every DataStride. seed makes the contents reproducible.
// Every file is fsynced. Errors name the file.
func WriteCapture(dir string, o manifest.SampleOptions, seed uint64) error {
	m := manifest.Sample(o)
	if err := m.Validate(); err != nil {
		return fmt.Errorf("sample manifest: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x7465_6d70))
	state := make([]byte, o.StateSizeBytes)
	fill(rng, state)
	if err := writeFile(filepath.Join(dir, "state.bin"), state); err != nil {
		return err
	}
	if err := writeMemory(filepath.Join(dir, "memory.bin"), int64(o.MemorySizeBytes), rng); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "manifest.bin"), manifest.Encode(m))
}

// WriteClass writes the class of a sample capture of manifest version 5 or
// 6 to path as indented JSON: templatekey.SampleClass with
// contracts.snapshot set to version, as publication requires.
func WriteClass(path string, version uint32) error {
	class := templatekey.SampleClass()
	class.Contracts.Snapshot = version
	data, err := json.MarshalIndent(class, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(data, '\n'))
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32() | 1) // never zero, so every block is data
	}
}

func writeMemory(path string, size int64, rng *rand.Rand) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	block := make([]byte, DataBlock)
	for off := int64(0); off < size; off += DataStride {
		fill(rng, block)
		n := min(int64(len(block)), size-off)
		if _, err := f.WriteAt(block[:n], off); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
