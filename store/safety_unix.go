//go:build unix

package store

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// mkdirPrivate creates directory dir with mode 0700.
func mkdirPrivate(dir string) error { return os.Mkdir(dir, 0o700) }

// checkPrivate refuses path unless it is a real directory or regular file
// (not a symbolic link, checked with Lstat) owned by the effective uid and
// not writable by group or others.
func checkPrivate(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return checkInfo(path, fi, os.Geteuid())
}

func checkInfo(path string, fi fs.FileInfo, uid int) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: %w", path, ErrUnsafePath)
	}
	if !fi.Mode().IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, want a directory or regular file: %w", path, fi.Mode().Type(), ErrUnsafePath)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no ownership information: %w", path, ErrUnsafePath)
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, want %d: %w", path, st.Uid, uid, ErrUnsafePath)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s has mode %v, writable by group or others: %w", path, fi.Mode().Perm(), ErrUnsafePath)
	}
	return nil
}

// checkTree applies checkPrivate to dir and everything below it. WalkDir
// uses Lstat, so it never follows a link out of the store.
func checkTree(dir string) error {
	uid := os.Geteuid()
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return checkInfo(path, fi, uid)
	})
}
