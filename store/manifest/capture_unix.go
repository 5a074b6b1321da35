//go:build unix

package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openCaptureDir opens dir with O_DIRECTORY|O_NOFOLLOW: a symbolic link
// or anything but a directory is ErrNotRegular.
func openCaptureDir(dir string) (*os.File, error) {
	dfd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("capture %q: a symlink or not a directory: %w", dir, ErrNotRegular)
	}
	if err != nil {
		return nil, fmt.Errorf("capture %q: open directory: %w", dir, err)
	}
	return os.NewFile(uintptr(dfd), dir), nil
}

// openArtifact opens dir/name relative to d without following a symlink
// and requires a regular file. O_NONBLOCK keeps a FIFO from blocking the
// open; it is cleared once the file is known to be regular.
func openArtifact(d *os.File, dir, name string) (CaptureFile, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
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
