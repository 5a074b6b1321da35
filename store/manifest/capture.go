package manifest

import (
	"errors"
	"os"
)

// Artifact file names of a capture directory (openvmm-snapshot-format.md §1).
const (
	ManifestFileName    = "manifest.bin"
	StateFileName       = "state.bin"
	MemoryFileName      = "memory.bin"
	ScratchFileName     = "scratch.img"
	ResumeClaimFileName = "resume.claim"
)

// Artifact is a payload file a capture must hold besides manifest.bin, with
// the exact length in bytes the manifest declares.
type Artifact struct {
	Name string
	Size int64
}

// Artifacts returns the payload files the capture of a valid m holds, in
// publication order (§6): state.bin (state_size_bytes), memory.bin
// (memory_size_bytes), then scratch.img (the paired block's length) when a
// sandbox block names it. Call it only after Validate, which bounds the
// sizes to int64.
func (m *Manifest) Artifacts() []Artifact {
	a := []Artifact{
		{Name: StateFileName, Size: int64(m.StateSizeBytes)},
		{Name: MemoryFileName, Size: int64(m.MemorySizeBytes)},
	}
	if m.Contract != nil {
		if b := m.Contract.pairedScratch(); b != nil {
			a = append(a, Artifact{Name: ScratchFileName, Size: int64(b.Length)})
		}
	}
	return a
}

// CaptureFile is one open, read-only, regular artifact of a capture.
type CaptureFile struct {
	Name string
	Size int64 // bytes, from fstat when opened
	File *os.File
}

// Capture is an opened, validated capture directory. Its files stay open
// until Close, so later renames or replacements of the paths do not change
// what the handles read.
type Capture struct {
	Dir           string
	Manifest      *Manifest
	ManifestBytes []byte        // manifest.bin as read, at most MaxManifestSize bytes
	Files         []CaptureFile // manifest.bin first, then Manifest.Artifacts() in order
}

// Close closes every file of c and returns their errors joined. It is safe to
// call more than once.
func (c *Capture) Close() error {
	var errs []error
	for i := range c.Files {
		if f := c.Files[i].File; f != nil {
			errs = append(errs, f.Close())
			c.Files[i].File = nil
		}
	}
	return errors.Join(errs...)
}
