//go:build linux

package fs

import (
	"syscall"

	"templatefs/leasefs"
)

// toSyscall maps a leasefs.Errno to the Linux errno by name. The switch is
// exhaustive over leasefs.Errnos (errno_test.go checks it); a value it does
// not know is EIO.
func toSyscall(e leasefs.Errno) syscall.Errno {
	switch e {
	case leasefs.OK:
		return 0
	case leasefs.ENOENT:
		return syscall.ENOENT
	case leasefs.EEXIST:
		return syscall.EEXIST
	case leasefs.EPERM:
		return syscall.EPERM
	case leasefs.EACCES:
		return syscall.EACCES
	case leasefs.EINVAL:
		return syscall.EINVAL
	case leasefs.EBUSY:
		return syscall.EBUSY
	case leasefs.EROFS:
		return syscall.EROFS
	case leasefs.ENOTDIR:
		return syscall.ENOTDIR
	case leasefs.EISDIR:
		return syscall.EISDIR
	case leasefs.EOVERFLOW:
		return syscall.EOVERFLOW
	case leasefs.ESRCH:
		return syscall.ESRCH
	case leasefs.ETIMEDOUT:
		return syscall.ETIMEDOUT
	case leasefs.EIO:
		return syscall.EIO
	case leasefs.ENOSPC:
		return syscall.ENOSPC
	case leasefs.EOPNOTSUPP:
		return syscall.EOPNOTSUPP
	case leasefs.ENOTEMPTY:
		return syscall.ENOTEMPTY
	case leasefs.ENOTCONN:
		return syscall.ENOTCONN
	case leasefs.EINTR:
		return syscall.EINTR
	case leasefs.ENOSYS:
		return syscall.ENOSYS
	}
	return syscall.EIO
}

// errnoOf maps a leasefs error for an operation that changes nothing
// (lookup, getattr, readdir, read-only open): no log line unless EIO.
func errnoOf(err error) syscall.Errno { return toSyscall(leasefs.ToErrno(err)) }
