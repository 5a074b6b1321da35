package leasefs

import (
	"fmt"
	"os"
)

// OpenFlags is what an open(2) asks for, decoded from the platform's flags
// by the adapter.
type OpenFlags struct {
	Write    bool // O_WRONLY or O_RDWR
	Truncate bool // O_TRUNC
}

// Handle is an open file. Exactly one of Data and File is set.
type Handle struct {
	// Data is the content of a text or lease file, rendered at open: the
	// handle keeps reading this snapshot, so adapters serve it without the
	// page cache (direct I/O) and cat never mixes two renderings.
	Data []byte
	// File is a payload's backing file, opened read-only with O_NOFOLLOW.
	// The caller owns it and must close it. Payloads never change, so
	// adapters may keep the page cache across opens.
	File *os.File
}

// Open opens file node n. Payload files and text files open read-only:
// a write or truncating open is ErrReadOnly. Lease files open for writing
// (touch opens its target O_WRONLY), but truncating one is
// ErrNotPermitted. Errors also: ErrIsDir, store.ErrNotFound when the node
// no longer exists, the store's open error.
func (f *FS) Open(n Node, fl OpenFlags) (Handle, error) {
	switch {
	case n.IsDir():
		return Handle{}, fmt.Errorf("open %s: %w", n, ErrIsDir)
	case n.kind == KindLeaseFile && fl.Truncate:
		return Handle{}, fmt.Errorf("truncate %s: %w", n, ErrNotPermitted)
	case n.kind != KindLeaseFile && (fl.Write || fl.Truncate):
		return Handle{}, fmt.Errorf("open %s for writing: %w", n, ErrReadOnly)
	case n.kind == KindPayloadFile:
		file, err := f.st.OpenPayload(n.Generation(), n.name)
		if err != nil {
			return Handle{}, err
		}
		return Handle{File: file}, nil
	}
	data, err := f.content(n)
	if err != nil {
		return Handle{}, err
	}
	return Handle{Data: data}, nil
}

// Write is the answer to write(2) on an open node: ErrBadWrite for a lease
// file (no values are accepted yet), ErrReadOnly for everything else.
func (f *FS) Write(n Node) error {
	if n.kind == KindLeaseFile {
		return fmt.Errorf("write %s: %w", n, ErrBadWrite)
	}
	return fmt.Errorf("write %s: %w", n, ErrReadOnly)
}

// AttrChange is the set of attributes a setattr asks to change.
type AttrChange uint8

// Attributes a setattr can change.
const (
	ChangeMode  AttrChange = 1 << iota // chmod
	ChangeOwner                        // chown: uid or gid
	ChangeSize                         // truncate
	ChangeTimes                        // utimes: atime, mtime or ctime, explicit or "now"
)

// isLeaseNode reports whether n is a lease file or a leases directory: the
// only nodes whose namespace changes through the mount.
func (n Node) isLeaseNode() bool {
	return n.kind == KindLeaseFile || n.kind == KindGenerationLeasesDir || n.kind == KindLeasesDir
}

// SetAttr applies a setattr to n. Lease files and leases directories
// accept a change of times as a no-op, so touch on a lease succeeds; any
// other change to them is ErrNotPermitted. Every other node is immutable:
// any change is ErrReadOnly. An empty change succeeds. Errors also:
// store.ErrNotFound when the node no longer exists.
func (f *FS) SetAttr(n Node, c AttrChange) error {
	if _, err := f.Attr(n); err != nil {
		return err
	}
	switch {
	case c == 0:
		return nil
	case !n.isLeaseNode():
		return fmt.Errorf("setattr %s: %w", n, ErrReadOnly)
	case c&^ChangeTimes != 0:
		return fmt.Errorf("setattr %s: only times may change: %w", n, ErrNotPermitted)
	}
	return nil
}

// ChangeXattr is the answer to setxattr(2) and removexattr(2): the tree
// stores no extended attributes, so lease nodes give ErrNotPermitted and
// every other node ErrReadOnly.
func (f *FS) ChangeXattr(n Node, name string) error {
	if n.isLeaseNode() {
		return fmt.Errorf("set xattr %q on %s: %w", name, n, ErrNotPermitted)
	}
	return fmt.Errorf("set xattr %q on %s: %w", name, n, ErrReadOnly)
}

// Create is open(2) with O_CREAT of name in dir. If name exists, excl
// (O_EXCL) gives ErrExist and otherwise the existing node is returned, to
// be opened (a retried create of a lease just opens it). A new name is
// allowed only in generations/<gen>/leases/ (or tombstones/<gen>/leases/,
// where the store refuses): it acquires a lease with store.AcquireLease,
// durable when Create returns. Errors: ErrNotPermitted for a new name
// elsewhere, ErrNotDir, and AcquireLease's store.ErrInvalidID,
// store.ErrNotFound, store.ErrTombstoned, store.ErrRetiring,
// store.ErrIneligible, store.ErrLeaseConflict.
func (f *FS) Create(dir Node, name string, excl bool) (Node, error) {
	existing, err := f.Lookup(dir, name)
	switch {
	case err == nil && excl:
		return Node{}, fmt.Errorf("create %q in %s: %w", name, dir, ErrExist)
	case err == nil:
		return existing, nil
	case !isNotFound(err):
		return Node{}, err
	case dir.kind != KindGenerationLeasesDir:
		return Node{}, fmt.Errorf("create %q in %s: files are created only in generation leases directories: %w", name, dir, ErrNotPermitted)
	}
	l, created, err := f.st.AcquireLease(dir.Generation(), name)
	if err != nil {
		return Node{}, fmt.Errorf("create lease %q on %s: %w", name, dir.Generation(), err)
	}
	if !created && excl {
		return Node{}, fmt.Errorf("create lease %q on %s: %w", name, dir.Generation(), ErrExist)
	}
	return objectNode(KindLeaseFile, l.Seq, l.CloneID)
}

// Remove is unlink(2) of name in dir. Only lease files can be removed,
// through either of their names; removal releases the lease with
// store.ReleaseLease, which removes a bound lease only once its process
// has verifiably exited. Errors: the Lookup errors (store.ErrNotFound,
// ErrNotDir), ErrIsDir for a directory, ErrNotPermitted for any other
// file, ReleaseLease's errors (store.ErrProcessAlive,
// store.ErrProcessUninspectable).
func (f *FS) Remove(dir Node, name string) error {
	n, err := f.Lookup(dir, name)
	switch {
	case err != nil:
		return err
	case n.IsDir():
		return fmt.Errorf("unlink %s: %w", n, ErrIsDir)
	case n.kind != KindLeaseFile:
		return fmt.Errorf("unlink %s: only lease files can be removed: %w", n, ErrNotPermitted)
	}
	if err := f.st.ReleaseLease(n.name); err != nil {
		return fmt.Errorf("release lease %q: %w", n.name, err)
	}
	return nil
}

// Rmdir is rmdir(2) of name in dir: no directory can be removed. Errors:
// the Lookup errors, ErrNotDir for a file, else ErrNotPermitted.
func (f *FS) Rmdir(dir Node, name string) error {
	n, err := f.Lookup(dir, name)
	switch {
	case err != nil:
		return err
	case !n.IsDir():
		return fmt.Errorf("rmdir %s: %w", n, ErrNotDir)
	}
	return fmt.Errorf("rmdir %s: %w", n, ErrNotPermitted)
}

// MakeEntry is mkdir(2), mknod(2), symlink(2) and link(2) of name in dir:
// the tree makes no such entries. Errors: ErrExist when name exists (as
// the kernel answers before asking), ErrNotDir, else ErrNotPermitted.
func (f *FS) MakeEntry(dir Node, name string) error {
	_, err := f.Lookup(dir, name)
	switch {
	case err == nil:
		return fmt.Errorf("make %q in %s: %w", name, dir, ErrExist)
	case !isNotFound(err):
		return err
	}
	return fmt.Errorf("make %q in %s: %w", name, dir, ErrNotPermitted)
}

// RenameFlags are the flags of renameat2(2), decoded by the adapter.
type RenameFlags uint32

// Rename flags.
const (
	RenameNoReplace RenameFlags = 1 << iota // RENAME_NOREPLACE
	RenameExchange                          // RENAME_EXCHANGE
	RenameWhiteout                          // RENAME_WHITEOUT
)

// Rename is rename(2) of oldDir/oldName to newDir/newName. The only rename
// is generations/<gen> to tombstones/<gen> (same name; flags 0 or
// RenameNoReplace), which tombstones the generation with store.Tombstone,
// recording uid (the caller's). Errors: the Lookup errors for the source
// (a generation already tombstoned is not under generations/:
// store.ErrNotFound), ErrNotPermitted for every other rename, including
// other names and flags (EPERM, not EXDEV, so mv does not fall back to
// copy and delete: fuse-and-store-notes.md §C6), the store's errors.
func (f *FS) Rename(oldDir Node, oldName string, newDir Node, newName string, flags RenameFlags, uid uint32) error {
	src, err := f.Lookup(oldDir, oldName)
	switch {
	case err != nil:
		return err
	case flags&^RenameNoReplace != 0:
		return fmt.Errorf("rename %s with flags %#x: %w", src, uint32(flags), ErrNotPermitted)
	case oldDir.kind != KindGenerationsDir || newDir.kind != KindTombstonesDir || oldName != newName:
		return fmt.Errorf("rename %q in %s to %q in %s: the only rename is generations/<gen> to tombstones/<gen>: %w",
			oldName, oldDir, newName, newDir, ErrNotPermitted)
	}
	if _, err := f.st.Tombstone(src.Generation(), uid); err != nil {
		return fmt.Errorf("tombstone %s: %w", src.Generation(), err)
	}
	return nil
}
