package leasefs

import "errors"

// Errors of the namespace itself; store errors pass through wrapped. The
// errno each maps to is in errno.go.
var (
	// ErrAccess is returned by every mutating method when the caller is
	// neither the store owner (store.OwnerUID) nor root: only they may
	// create, bind, kill or release leases, tombstone, lift or retire
	// (project issue 3). The check comes before any other, so nothing
	// changes.
	ErrAccess = errors.New("only the store owner or root may change the tree")
	// ErrReadOnly is returned when an operation would change an immutable
	// node: a write-open, truncate, chmod, chown, utimes or xattr change of
	// a payload file, a rendered text file, or a directory other than a
	// leases directory.
	ErrReadOnly = errors.New("read-only node")
	// ErrNotPermitted is returned when the namespace has no such operation
	// at that place: creating a file outside the leases directories of a
	// generation or key, mkdir, mknod, symlink, link, rmdir of anything but
	// a generation directory, unlink outside the leases directories, a
	// rename other than generations/<gen> to tombstones/<gen> and back,
	// and chmod, chown or xattr changes of lease and ctl files and leases
	// directories.
	ErrNotPermitted = errors.New("operation not permitted here")
	// ErrExist is returned by Create with excl set and by MakeEntry when the
	// name already exists.
	ErrExist = errors.New("already exists")
	// ErrNotDir is returned when a directory operation names a file.
	ErrNotDir = errors.New("not a directory")
	// ErrIsDir is returned by Open of a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrBadWrite is returned by Commands.Write and Commands.Flush when a
	// command line is not one command of the file's grammar: `pid
	// <1..2147483647>` or `kill` for a lease file, `tombstone`, `lift` or
	// `retire` for a ctl file, each at most MaxCommandLen bytes.
	ErrBadWrite = errors.New("not a command of this file")
	// ErrNotSupported is returned by Allocate: no file of the tree takes
	// data, so none can preallocate space.
	ErrNotSupported = errors.New("operation not supported by this file")
	// ErrRetirementPending is returned by Rmdir of retiring/<gen>: the
	// generation is already retiring and leaves the tree only when its
	// last lease is released.
	ErrRetirementPending = errors.New("retirement pending: the generation leaves when its last lease is released")
	// ErrInoOverflow is returned when an object number (generation ID, key
	// or lease sequence number) does not fit the 56 bits of an inode number
	// left after the class byte (see Node.Ino).
	ErrInoOverflow = errors.New("object number exceeds the inode number space")
)
