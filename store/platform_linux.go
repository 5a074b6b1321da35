package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames directory from to to, failing with EEXIST if to
// exists (renameat2 RENAME_NOREPLACE). The caller fsyncs both parents.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}

// openBeneath opens rel, a slash-separated path below the directory dir,
// read-only, without following a symbolic link in any component and
// without leaving dir: openat2 with RESOLVE_NO_SYMLINKS and
// RESOLVE_BENEATH. A link on the way fails with ELOOP, a path that would
// leave dir ("..", an absolute path) with EXDEV, both also wrapping
// ErrUnsafePath. On a kernel without
// openat2 (before Linux 5.6: ENOSYS) openWalk does the same one component
// at a time.
func openBeneath(dir *os.File, rel string) (*os.File, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	}
	fd, err := unix.Openat2(int(dir.Fd()), rel, &how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = openWalk(int(dir.Fd()), rel)
	}
	name := filepath.Join(dir.Name(), rel)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil, fmt.Errorf("%w (a symbolic link on the way, or a path out of %s): %w", &os.PathError{Op: "open", Path: name, Err: err}, dir.Name(), ErrUnsafePath)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openWalk is openBeneath without openat2: it opens each component of rel
// relative to the one before with O_NOFOLLOW (O_DIRECTORY for all but the
// last), so a symbolic link anywhere fails with ELOOP; an empty, "." or
// ".." component fails with EXDEV, as RESOLVE_BENEATH would refuse it.
func openWalk(dirfd int, rel string) (int, error) {
	parts := strings.Split(rel, "/")
	fd := dirfd
	for i, p := range parts {
		var next int
		var err error
		if p == "" || p == "." || p == ".." {
			next, err = -1, unix.EXDEV
		} else {
			flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
			if i < len(parts)-1 {
				flags |= unix.O_DIRECTORY
			}
			next, err = unix.Openat(fd, p, flags, 0)
			var st unix.Stat_t
			if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(fd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP // O_DIRECTORY reports a link as ENOTDIR
			}
		}
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}
