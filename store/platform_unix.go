//go:build unix

package store

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// syncDir fsyncs a directory so that entries created, renamed or removed
// in it are durable.
func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", path, err)
	}
	return nil
}

// openNoFollow opens path read-only; a symbolic link as the last
// component fails with ELOOP (O_NOFOLLOW).
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
}

// writeLockOwner records pid as text in the lock file at path, replacing
// what an earlier owner wrote.
func writeLockOwner(path string, pid int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o600)
}

// readLockOwner returns the pid text the lock file at path holds, or ""
// if it cannot be read.
func readLockOwner(path string) string {
	owner, _ := os.ReadFile(path)
	return string(owner)
}

// killSelf sends this process SIGKILL. Delivery is not synchronous: the
// caller must not go on.
func killSelf() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }

// stampOf returns f's size, mtime and ctime (fstat). A write, truncate,
// chmod or utimes through any name or handle moves the ctime.
func stampOf(f *os.File) (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileStamp{}, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return fileStamp{
		Size:  st.Size,
		Mtime: time.Unix(st.Mtim.Unix()),
		Ctime: time.Unix(st.Ctim.Unix()),
	}, nil
}

// openDir opens the store directory itself, refusing a symbolic link
// (O_NOFOLLOW) and anything but a directory (O_DIRECTORY).
func openDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
}

// linkCount returns the number of hard links of f (fstat st_nlink).
func linkCount(f *os.File) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return uint64(st.Nlink), nil
}
