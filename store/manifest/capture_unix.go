//go:build unix

package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// OpenCapture opens the capture directory dir the way OpenVMM opens a
// snapshot (openvmm-snapshot-format.md §1, §5.1): dir is opened once with
// O_DIRECTORY|O_NOFOLLOW and every artifact relative to that handle with
// O_NOFOLLOW; each must be a regular file. manifest.bin is size-checked
// from fstat before it is read, read with a MaxManifestSize+1 cap, decoded
// and validated. Then the directory must hold exactly manifest.bin and
// m.Artifacts(), each with the declared length. Staging siblings
// (.*.staging-*) live next to dir, not in it, and are not looked at.
//
// On success the caller owns the returned Capture and must Close it. Errors
// wrap ErrNotRegular (dir or an artifact is a symlink or of the wrong type),
// ErrTooLarge, the Decode and Validate errors, ErrUnexpectedArtifact (an
// extra entry, resume.claim included), ErrIncompleteCapture (a missing
// artifact), ErrArtifactSize, or the system error.
func OpenCapture(dir string) (_ *Capture, err error) {
	dfd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("capture %q: a symlink or not a directory: %w", dir, ErrNotRegular)
	}
	if err != nil {
		return nil, fmt.Errorf("capture %q: open directory: %w", dir, err)
	}
	d := os.NewFile(uintptr(dfd), dir)
	defer d.Close()

	c := &Capture{Dir: dir}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	mf, err := openArtifact(dfd, dir, ManifestFileName)
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
		err = m.Validate()
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
		f, err := openArtifact(dfd, dir, a.Name)
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

// openArtifact opens dir/name relative to dfd without following a symlink
// and requires a regular file. O_NONBLOCK keeps a FIFO from blocking the
// open; it is cleared once the file is known to be regular.
func openArtifact(dfd int, dir, name string) (CaptureFile, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return CaptureFile{}, fmt.Errorf("capture %q: %s is missing: %w", dir, name, ErrIncompleteCapture)
	case errors.Is(err, unix.ELOOP):
		return CaptureFile{}, fmt.Errorf("capture %q: %s is a symlink: %w", dir, name, ErrNotRegular)
	case err != nil:
		return CaptureFile{}, fmt.Errorf("capture %q: open %s: %w", dir, name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return CaptureFile{}, fmt.Errorf("capture %q: stat %s: %w", dir, name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return CaptureFile{}, fmt.Errorf("capture %q: %s is not a regular file (mode %#o): %w", dir, name, st.Mode, ErrNotRegular)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return CaptureFile{}, fmt.Errorf("capture %q: %s: clear O_NONBLOCK: %w", dir, name, err)
	}
	return CaptureFile{Name: name, Size: st.Size, File: os.NewFile(uintptr(fd), filepath.Join(dir, name))}, nil
}

// retryEINTR repeats open while it is interrupted, as package os does.
func retryEINTR(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
