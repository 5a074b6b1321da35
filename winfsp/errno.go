//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// toFuse maps a leasefs.Errno by name to the negative errno cgofuse
// returns to FUSE (cgofuse defines the numbers per platform: Linux's on
// Linux, WinFsp's POSIX table on Windows). The switch is exhaustive over
// leasefs.Errnos (errno_test.go checks it); a value it does not know is
// -EIO.
func toFuse(e leasefs.Errno) int {
	switch e {
	case leasefs.OK:
		return 0
	case leasefs.ENOENT:
		return -fuse.ENOENT
	case leasefs.EEXIST:
		return -fuse.EEXIST
	case leasefs.EPERM:
		return -fuse.EPERM
	case leasefs.EACCES:
		return -fuse.EACCES
	case leasefs.EINVAL:
		return -fuse.EINVAL
	case leasefs.EBUSY:
		return -fuse.EBUSY
	case leasefs.EROFS:
		return -fuse.EROFS
	case leasefs.ENOTDIR:
		return -fuse.ENOTDIR
	case leasefs.EISDIR:
		return -fuse.EISDIR
	case leasefs.EOVERFLOW:
		return -fuse.EOVERFLOW
	case leasefs.ESRCH:
		return -fuse.ESRCH
	case leasefs.ETIMEDOUT:
		return -fuse.ETIMEDOUT
	case leasefs.EIO:
		return -fuse.EIO
	case leasefs.ENOSPC:
		return -fuse.ENOSPC
	case leasefs.EOPNOTSUPP:
		return -fuse.EOPNOTSUPP
	case leasefs.ENOTEMPTY:
		return -fuse.ENOTEMPTY
	case leasefs.ENOTCONN:
		return -fuse.ENOTCONN
	case leasefs.EINTR:
		return -fuse.EINTR
	case leasefs.ENOSYS:
		return -fuse.ENOSYS
	}
	return -fuse.EIO
}

// errnoOf maps the error of an operation that changes nothing (lookup,
// getattr, readdir, read-only open): no log line unless EIO.
func errnoOf(err error) int { return toFuse(leasefs.ToErrno(err)) }
