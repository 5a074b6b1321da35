package leasefs

import "errors"

// Errors of the namespace itself; store errors pass through wrapped. The
// errno each maps to is in errno.go.
var (
	// ErrReadOnly is returned when an operation would change an immutable
	// node: a write-open, truncate, chmod, chown, utimes or xattr change of
	// a payload file, a rendered text file, or a directory other than a
	// leases directory.
	ErrReadOnly = errors.New("read-only node")
	// ErrNotPermitted is returned when the namespace has no such operation
	// at that place: creating a file outside generations/<gen>/leases/,
	// mkdir, mknod, symlink, link, rmdir, unlink outside the leases
	// directories, any rename other than generations/<gen> to
	// tombstones/<gen>, and attribute or xattr changes other than times on
	// lease files and leases directories.
	ErrNotPermitted = errors.New("operation not permitted here")
	// ErrExist is returned by Create with excl set and by MakeEntry when the
	// name already exists.
	ErrExist = errors.New("already exists")
	// ErrNotDir is returned when a directory operation names a file.
	ErrNotDir = errors.New("not a directory")
	// ErrIsDir is returned by Open of a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrBadWrite is returned by Write to a lease file: lease files accept
	// no written values yet.
	ErrBadWrite = errors.New("lease files accept no writes")
	// ErrInoOverflow is returned when an object number (generation ID, key
	// or lease sequence number) does not fit the 56 bits of an inode number
	// left after the class byte (see Node.Ino).
	ErrInoOverflow = errors.New("object number exceeds the inode number space")
)
