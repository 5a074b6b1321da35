package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
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
	Size int64 // bytes, from the open handle (fstat on Unix)
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

// OpenCapture opens the capture directory dir the way OpenVMM opens a
// snapshot (openvmm-snapshot-format.md §1, §5.1): dir is opened once
// (openCaptureDir: O_DIRECTORY|O_NOFOLLOW on Unix; on Windows a reparse
// point is refused) and every artifact relative to that handle
// (openArtifact) without following a symbolic link or reparse point; each
// must be a regular file. manifest.bin is size-checked from its open
// handle before it is read, read with a MaxManifestSize+1 cap, decoded and
// validated by ValidateAt(now), now being the host's UTC clock. Then the directory must hold exactly manifest.bin and
// m.Artifacts(), each with the declared length. Staging siblings
// (.*.staging-*) live next to dir, not in it, and are not looked at.
//
// On success the caller owns the returned Capture and must Close it. Errors
// wrap ErrNotRegular (dir or an artifact is a symlink, a reparse point or
// of the wrong type), ErrTooLarge, the Decode and Validate errors,
// ErrUnexpectedArtifact (an extra entry, resume.claim included),
// ErrIncompleteCapture (a missing artifact), ErrArtifactSize, or the
// system error.
func OpenCapture(dir string, now time.Time) (_ *Capture, err error) {
	d, err := openCaptureDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()

	c := &Capture{Dir: dir}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	mf, err := openArtifact(d, dir, ManifestFileName)
	if err != nil {
		return nil, err
	}
	c.Files = append(c.Files, mf)
	if mf.Size > MaxManifestSize {
		return nil, fmt.Errorf("capture %q: %s is %d bytes, limit %d: %w", dir, ManifestFileName, mf.Size, MaxManifestSize, ErrTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(mf.File, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("capture %q: read %s: %w", dir, ManifestFileName, err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("capture %q: %s grew past %d bytes while read: %w", dir, ManifestFileName, MaxManifestSize, ErrTooLarge)
	}
	if int64(len(data)) != mf.Size {
		return nil, fmt.Errorf("capture %q: %s changed while read: %d bytes read, fstat said %d: %w",
			dir, ManifestFileName, len(data), mf.Size, ErrArtifactSize)
	}
	m, err := Decode(data)
	if err == nil {
		err = m.ValidateAt(now)
	}
	if err != nil {
		return nil, fmt.Errorf("capture %q: %s: %w", dir, ManifestFileName, err)
	}
	c.Manifest, c.ManifestBytes = m, data

	artifacts := m.Artifacts()
	if err := checkInventory(d, m, artifacts); err != nil {
		return nil, fmt.Errorf("capture %q: %w", dir, err)
	}
	for _, a := range artifacts {
		f, err := openArtifact(d, dir, a.Name)
		if err != nil {
			return nil, err
		}
		c.Files = append(c.Files, f)
		if f.Size != a.Size {
			return nil, fmt.Errorf("capture %q: %s is %d bytes, manifest says %d: %w", dir, a.Name, f.Size, a.Size, ErrArtifactSize)
		}
	}
	return c, nil
}

// checkInventory refuses any entry of d other than manifest.bin and
// artifacts (§1). Missing entries are found when they are opened.
func checkInventory(d *os.File, m *Manifest, artifacts []Artifact) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list directory: %w", err)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == ManifestFileName || slices.ContainsFunc(artifacts, func(a Artifact) bool { return a.Name == name }) {
			continue
		}
		if name == ResumeClaimFileName && m.RestorePolicy == "resume" {
			return fmt.Errorf("resume capture has already been claimed (%s present): %w", name, ErrUnexpectedArtifact)
		}
		return fmt.Errorf("entry %q is not an artifact of this capture: %w", name, ErrUnexpectedArtifact)
	}
	return nil
}
