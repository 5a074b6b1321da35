//go:build unix

package store

import (
	"errors"
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
	return checkOwner(path, fi, uid)
}

// checkOwner refuses path unless it is owned by uid and not writable by
// group or others.
func checkOwner(path string, fi fs.FileInfo, uid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no ownership information: %w", path, ErrUnsafePath)
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, want %d (chown it, or run as its owner): %w", path, st.Uid, uid, ErrUnsafePath)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s has mode %s, writable by group or others (chmod go-w %s): %w", path, modeString(fi.Mode()), path, ErrUnsafePath)
	}
	return nil
}

// checkTree applies checkPrivate to dir and everything below it. WalkDir
// uses Lstat, so it never follows a link out of the store.
//
// The one entry that may be neither is ControlSocket, directly in dir: a
// socket, under the same ownership and mode rules.
func checkTree(dir string) error {
	uid := os.Geteuid()
	sock := filepath.Join(dir, ControlSocket)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if path == sock && fi.Mode().Type() == fs.ModeSocket {
			return checkOwner(path, fi, uid)
		}
		return checkInfo(path, fi, uid)
	})
}

// checkParents resolves the symbolic links in the directories above dir
// (an absolute path) and returns dir below the resolved parent, after
// checking that no user other than uid and root can replace any component
// on the way: every directory from / down to dir's parent must be owned by
// root or uid, and may be writable by group or others only if it is sticky
// and the component below it is owned by uid or root, as /tmp/<yours> is
// (in a sticky directory only an entry's owner may rename or remove it).
// It returns ErrUnsafePath naming the directory, its mode as ls shows it
// and the owner at fault. dir itself is checkTree's.
func checkParents(dir string, uid int) (string, error) {
	parent, err := filepath.EvalSymlinks(filepath.Dir(dir))
	if err != nil {
		return "", err
	}
	dir = filepath.Join(parent, filepath.Base(dir))
	chain := []string{dir} // dir, its parent, ..., /
	for p := dir; filepath.Dir(p) != p; p = filepath.Dir(p) {
		chain = append(chain, filepath.Dir(p))
	}
	for i := len(chain) - 1; i > 0; i-- { // from / down
		if err := checkParent(chain[i], chain[i-1], uid); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// checkParent checks directory dir, one of the store's ancestors, and the
// next component child on the way down (checkParents).
func checkParent(dir, child string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s, above the store, is a %s, not a directory: %w", dir, modeString(fi.Mode()), ErrUnsafePath)
	case !ok:
		return fmt.Errorf("%s: no ownership information: %w", dir, ErrUnsafePath)
	case st.Uid != 0 && int(st.Uid) != uid:
		return fmt.Errorf("%s, above the store, is owned by uid %d, who can replace %s (put the store in a directory of yours): %w", dir, st.Uid, child, ErrUnsafePath)
	case fi.Mode().Perm()&0o022 == 0:
		return nil
	case fi.Mode()&fs.ModeSticky == 0:
		return fmt.Errorf("%s, above the store, has mode %s: writable by group or others, who can replace %s (chmod go-w %s, or put the store elsewhere): %w", dir, modeString(fi.Mode()), child, dir, ErrUnsafePath)
	}
	cfi, err := os.Lstat(child)
	if errors.Is(err, fs.ErrNotExist) {
		// Only the store directory itself can be missing (its parent was
		// resolved): Init is about to make it, and then checks that it
		// is ours (checkPrivate), so one made first by another user fails.
		return nil
	}
	if err != nil {
		return err
	}
	if cst, ok := cfi.Sys().(*syscall.Stat_t); !ok || cst.Uid != 0 && int(cst.Uid) != uid {
		return fmt.Errorf("%s, above the store, has mode %s (sticky, writable by others) and %s is not owned by uid %d or root, so its owner can replace it (put the store in a directory of yours): %w",
			dir, modeString(fi.Mode()), child, uid, ErrUnsafePath)
	}
	return nil
}

// modeString formats m as ls -l does: the file type letter ('d' for a
// directory, '-' for a regular file), then the permission bits, with
// setuid, setgid and sticky shown as s, S, t and T (fs.FileMode's String
// writes the type and special bits as a prefix of letters instead).
func modeString(m fs.FileMode) string {
	b := []byte("-rwxrwxrwx")
	switch {
	case m.IsDir():
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	case m&fs.ModeSocket != 0:
		b[0] = 's'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	}
	for i := range 9 {
		if m&(1<<(8-i)) == 0 {
			b[1+i] = '-'
		}
	}
	for _, sp := range []struct {
		bit fs.FileMode
		pos int
		on  byte
	}{{fs.ModeSetuid, 3, 's'}, {fs.ModeSetgid, 6, 's'}, {fs.ModeSticky, 9, 't'}} {
		if m&sp.bit != 0 {
			if b[sp.pos] == 'x' {
				b[sp.pos] = sp.on
			} else {
				b[sp.pos] = sp.on - 'a' + 'A'
			}
		}
	}
	return string(b)
}
