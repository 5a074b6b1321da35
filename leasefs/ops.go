package leasefs

import (
	"fmt"
	"os"

	"templatefs/store"
)

// OpenFlags is what an open(2) asks for, decoded from the platform's flags
// by the adapter.
type OpenFlags struct {
	Write    bool // O_WRONLY or O_RDWR
	Truncate bool // O_TRUNC
	Append   bool // O_APPEND: only incoming files take it
}

// Handle is an open file. Exactly one of Data, File, Snapshot, Incoming
// and Events is set.
type Handle struct {
	// Data is the content of a text, lease or ctl file, rendered at open:
	// the handle keeps reading this snapshot, so adapters serve it without
	// the page cache (direct I/O) and cat never mixes two renderings.
	Data []byte
	// File is a payload's backing file, opened read-only with O_NOFOLLOW.
	// The caller owns it and must close it. Payloads never change, so
	// adapters may keep the page cache across opens.
	File *os.File
	// Snapshot is store.db's index snapshot, taken at open
	// (store.SnapshotIndex) into an unlinked file. The caller owns it and
	// must close it. Each open sees its own snapshot, so adapters serve it
	// without the page cache (direct I/O).
	Snapshot *os.File
	// Events is an open of the events file: a stream with no offsets and
	// no size, which adapters serve with direct I/O, reading in order
	// (Events.Read blocks). The caller must Close it at release.
	Events *Events
	// Commands is set on an open of a lease or ctl file for writing: the
	// handle's command stream. Adapters pass it every write(2) and call
	// its Flush at each close (FLUSH) and at RELEASE.
	Commands *Commands
	// Incoming is an open file of an incoming directory: the adapter reads
	// and writes its backing file, closes it and calls Released.
	Incoming *IncomingFile
}

// isWritable reports whether n takes writes: lease files (`pid N`,
// `kill`) and ctl files (`tombstone`, `lift`, `retire`).
func (n Node) isWritable() bool { return n.kind.Content() == ContentCommands }

// isLeaseNode reports whether n is a writable file or a leases directory:
// the nodes that accept a change of times (and, for files, of size) as a
// no-op, and refuse other attribute changes with ErrNotPermitted rather
// than ErrReadOnly.
func (n Node) isLeaseNode() bool { return n.kind.facts().touch }

// Open opens file node n for c. Payload files, text files and the
// events file (a new subscription, Handle.Events) open read-only: a write
// or truncating open is ErrReadOnly. A payload open by a process that
// carries the launch ID of a Reserved lease on the payload's generation
// binds that lease to it before the open returns (bindOpener); a refused
// bind refuses the open. Lease and ctl
// files open for writing, O_TRUNC included (`echo pid 123 > file` opens
// O_WRONLY|O_TRUNC; truncating them is a no-op), but only for the store
// owner and root (ErrAccess); an incoming ctl file not while its
// directory is being published (ErrIncomingBusy). Errors also: ErrIsDir, store.ErrNotFound
// when the node no longer exists, the store's open error, and for a
// payload the bind's (store.BindLaunched: store.ErrTombstoned,
// store.ErrRetiring, store.ErrIneligible and the others of BindLease).
func (f *FS) Open(n Node, fl OpenFlags, c Caller) (Handle, error) {
	if err := f.enter("open"); err != nil {
		return Handle{}, err
	}
	defer f.leave()
	content := n.kind.Content()
	switch {
	case content == ContentListing:
		return Handle{}, fmt.Errorf("open %s: %w", n, ErrIsDir)
	case content == ContentBacking:
		return f.openIncoming(n, fl, c)
	case fl.Write || fl.Truncate:
		if err := f.authorize(c, "open "+n.String()+" for writing"); err != nil {
			return Handle{}, err
		}
		if !n.isWritable() {
			return Handle{}, fmt.Errorf("open %s for writing: %w", n, ErrReadOnly)
		}
		if n.kind == KindIncomingCtlFile {
			if err := f.openIncomingCtl(n); err != nil {
				return Handle{}, err
			}
		}
	case content == ContentPayload:
		file, err := f.st.OpenPayload(n.Generation(), n.name)
		if err != nil {
			return Handle{}, err
		}
		if err := f.bindOpener(n, c); err != nil {
			file.Close()
			return Handle{}, err
		}
		return Handle{File: file}, nil
	case content == ContentSnapshot:
		file, _, err := f.st.SnapshotIndex()
		if err != nil {
			return Handle{}, err
		}
		return Handle{Snapshot: file}, nil
	case content == ContentStream:
		return Handle{Events: f.openEvents()}, nil
	}
	data, err := f.content(n)
	if err != nil {
		return Handle{}, err
	}
	h := Handle{Data: data}
	if fl.Write {
		h.Commands = f.commands(n)
	}
	return h, nil
}

// OpenErrno is the errno of an Open of path with fl that failed with err
// (OK for nil): an open for writing or truncating asks for a change, so
// its failure is a refused mutation, logged once by Refuse; a read-only
// open's failure is mapped with ToErrno and not logged (ENOENT is
// routine). path is the adapter's path of the node, for the log line.
func (f *FS) OpenErrno(path string, fl OpenFlags, err error) Errno {
	if fl.Write || fl.Truncate {
		return f.Refuse("open", path, err)
	}
	return ToErrno(err)
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

// SetAttr applies setattr change ch to n for c. Lease and ctl files accept
// a change of times or size as a no-op (touch and the truncate of
// `echo ... > file` succeed), leases directories a change of times; any
// other change to them is ErrNotPermitted. Every other node is immutable:
// any change is ErrReadOnly. An empty change succeeds for anyone; any
// other needs the store owner or root (ErrAccess). Errors also:
// store.ErrNotFound when the node no longer exists.
func (f *FS) SetAttr(n Node, ch AttrChange, c Caller) error {
	if _, err := f.Attr(n); err != nil {
		return err
	}
	if ch == 0 {
		return nil
	}
	if err := f.authorize(c, "setattr "+n.String()); err != nil {
		return err
	}
	allowed := ChangeTimes
	if n.isWritable() {
		allowed |= ChangeSize
	}
	switch {
	case !n.isLeaseNode():
		return fmt.Errorf("setattr %s: %w", n, ErrReadOnly)
	case ch&^allowed != 0:
		return fmt.Errorf("setattr %s: only times (and the size of lease and ctl files) may change: %w", n, ErrNotPermitted)
	}
	return nil
}

// Allocate is the answer to fallocate(2) of n by c (the kernel sends it
// only for a descriptor open for writing, so for lease and ctl files):
// they take commands, not data. Errors: ErrAccess, else ErrNotSupported.
func (f *FS) Allocate(n Node, c Caller) error {
	if err := f.authorize(c, "fallocate "+n.String()); err != nil {
		return err
	}
	if n.kind == KindIncomingFile {
		return f.incomingChange(n.incomingDirName(), func() error { return nil })
	}
	return fmt.Errorf("fallocate %s: %w", n, ErrNotSupported)
}

// ChangeXattr is the answer to setxattr(2) and removexattr(2) by c: the
// tree stores no extended attributes, so lease nodes give ErrNotPermitted
// and every other node ErrReadOnly (ErrAccess first for other users).
func (f *FS) ChangeXattr(n Node, name string, c Caller) error {
	if err := f.authorize(c, fmt.Sprintf("set xattr %q on %s", name, n)); err != nil {
		return err
	}
	if n.isLeaseNode() {
		return fmt.Errorf("set xattr %q on %s: %w", name, n, ErrNotPermitted)
	}
	return fmt.Errorf("set xattr %q on %s: %w", name, n, ErrReadOnly)
}

// Create is open(2) with O_CREAT of name in dir by c; it returns the lease
// file with its attributes and content (Created). If name exists, excl
// (O_EXCL) gives ErrExist; otherwise an existing lease file is returned
// (a retried create of a lease just opens it) and any other existing
// name gives ErrExist. A new name is
// allowed only in a generation's leases directory, where it acquires a
// lease on that generation with store.AcquireLease (refused by the store
// under tombstones/ and retiring/), and in keys/<key-id>/leases/, where
// it acquires one on the key's newest eligible published generation with
// store.AcquireLeaseByKey; either is durable when Create returns. Errors:
// ErrAccess, ErrNotPermitted for a new name elsewhere, ErrNotDir, the
// store's store.ErrInvalidID, store.ErrNotFound, store.ErrTombstoned,
// store.ErrRetiring, store.ErrIneligible, store.ErrLeaseConflict. A refusal
// in a generation's leases directory is remembered as its last refusal.
func (f *FS) Create(dir Node, name string, excl bool, c Caller) (cr Created, err error) {
	if err := f.enter("create"); err != nil {
		return Created{}, err
	}
	defer f.leave()
	defer func() { f.refusals.note(dir.Generation(), "create "+name, err) }()
	if err := f.authorize(c, fmt.Sprintf("create %q in %s", name, dir)); err != nil {
		return Created{}, err
	}
	if dir.kind == KindIncomingEntryDir {
		return f.createIncoming(dir, name, excl)
	}
	existing, err := f.Lookup(dir, name)
	switch {
	case err == nil && excl:
		return Created{}, fmt.Errorf("create %q in %s: %w", name, dir, ErrExist)
	case err == nil && existing.kind == KindLeaseFile:
		l, err := f.lease(existing)
		if err != nil {
			return Created{}, err
		}
		return f.createdLease(existing, l)
	case err == nil:
		a, err := f.Attr(existing)
		return Created{Node: existing, Attr: a}, err
	case !isNotFound(err):
		return Created{}, err
	}
	var l store.Lease
	var created bool
	switch dir.kind {
	case KindGenerationLeasesDir:
		l, created, err = f.st.AcquireLease(dir.Generation(), name)
	case KindKeyLeasesDir:
		l, created, err = f.st.AcquireLeaseByKey(dir.name, name)
	default:
		return Created{}, fmt.Errorf("create %q in %s: files are created only in leases directories of a generation or key: %w", name, dir, ErrNotPermitted)
	}
	switch {
	case err != nil:
		return Created{}, fmt.Errorf("create lease %q in %s: %w", name, dir, err)
	case !created && excl:
		return Created{}, fmt.Errorf("create lease %q in %s: %w", name, dir, ErrExist)
	}
	n, err := objectNode(KindLeaseFile, l.Seq, l.CloneID)
	if err != nil {
		return Created{}, err
	}
	return f.createdLease(n, l)
}

// Created is the lease file that Create made or found, with its
// attributes and content as of the acquisition. Adapters answer the
// create(2) from it rather than reading the store again: another caller
// may release the lease in between, and the create must still succeed,
// like an open(O_CREAT) of a file that is unlinked right after.
type Created struct {
	Node Node
	Attr Attr
	// Data is the lease record as `cat` shows it, for a lease file; nil
	// for any other existing node, which the adapter opens with Open.
	Data []byte
	// Commands is the command stream of the lease file's new handle (a
	// create opens for writing); nil with Data.
	Commands *Commands
	// Incoming is the open of a created incoming file.
	Incoming *IncomingFile
}

// Handle is the open handle of a created lease or incoming file.
func (cr Created) Handle() Handle {
	return Handle{Data: cr.Data, Commands: cr.Commands, Incoming: cr.Incoming}
}

func (f *FS) createdLease(n Node, l store.Lease) (Created, error) {
	a, data, err := f.leaseAttr(n, l)
	return Created{Node: n, Attr: a, Data: data, Commands: f.commands(n)}, err
}

// Remove is unlink(2) of name in dir by c. Only lease files can be
// removed, through any of their names; removal releases the lease with
// store.ReleaseLease, which removes a bound lease only once its process
// has verifiably exited, and refuses a reserved lease
// (store.ErrLeaseReserved: only `cancel` ends it), so that mv of a lease
// or a generation out of the mount, which copies and then unlinks, never
// ends a reservation. Errors: ErrAccess, the Lookup errors
// (store.ErrNotFound, ErrNotDir), ErrIsDir for a directory,
// ErrNotPermitted for any other file, ReleaseLease's errors
// (store.ErrLeaseReserved, store.ErrProcessAlive,
// store.ErrProcessUninspectable). A refused
// release is remembered as its generation's last refusal.
func (f *FS) Remove(dir Node, name string, c Caller) (err error) {
	if err := f.enter("unlink"); err != nil {
		return err
	}
	defer f.leave()
	n, lerr := f.Lookup(dir, name)
	gen := dir.Generation()
	if lerr == nil && n.kind == KindLeaseFile {
		if l, err := f.lease(n); err == nil {
			gen = l.Generation
		}
	}
	defer func() { f.refusals.note(gen, "unlink "+name, err) }()
	if err := f.authorize(c, fmt.Sprintf("unlink %q in %s", name, dir)); err != nil {
		return err
	}
	switch {
	case lerr != nil:
		return lerr
	case n.IsDir():
		return fmt.Errorf("unlink %s: %w", n, ErrIsDir)
	case dir.kind == KindIncomingEntryDir:
		return f.removeIncoming(dir, name)
	case n.kind != KindLeaseFile:
		return fmt.Errorf("unlink %s: only lease files can be removed: %w", n, ErrNotPermitted)
	}
	return f.st.ReleaseLeaseSeq(n.name, n.num) // its errors name the lease
}

// Rmdir is rmdir(2) of name in dir by c. A generation directory always
// has children, so rmdir here does not mean "remove an empty directory":
// it is the retirement transition (project issue 3).
//
//   - tombstones/<gen>: store.Retire records the intent durably and the
//     generation moves to retiring/<gen>/, readable by its lease holders,
//     until its last lease is released; one without leases is deleted at
//     once.
//   - generations/<gen>: store.ErrNotTombstoned; only tombstoned
//     generations can be retired.
//   - retiring/<gen>: retried with store.Retire (which resumes a deletion
//     that failed); if the generation still exists, ErrRetirementPending.
//   - any other directory: ErrNotPermitted.
//
// Errors also: ErrAccess, the Lookup errors, ErrNotDir for a file. A
// refused rmdir in a generation is remembered as its last refusal.
func (f *FS) Rmdir(dir Node, name string, c Caller) (err error) {
	if err := f.enter("rmdir"); err != nil {
		return err
	}
	defer f.leave()
	n, lerr := f.Lookup(dir, name)
	gen := n.Generation()
	defer func() { f.refusals.note(gen, "rmdir "+name, err) }()
	if err := f.authorize(c, fmt.Sprintf("rmdir %q in %s", name, dir)); err != nil {
		return err
	}
	switch {
	case lerr != nil:
		return lerr
	case !n.IsDir():
		return fmt.Errorf("rmdir %s: %w", n, ErrNotDir)
	case n.kind == KindIncomingEntryDir:
		return f.rmdirIncoming(name)
	case n.kind != KindGenerationDir:
		return fmt.Errorf("rmdir %s: %w", n, ErrNotPermitted)
	}
	if _, err := f.st.Retire(gen, c.UID); err != nil {
		return fmt.Errorf("rmdir %s: %w", n, err)
	}
	if dir.kind != KindRetiringDir {
		return nil
	}
	leases, err := f.st.GenerationLeases(gen)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("rmdir %s: %d leases remain: %w", n, len(leases), ErrRetirementPending)
}

// MakeEntry is mkdir(2), mknod(2), symlink(2) and link(2) of name in dir
// by c: the tree makes no such entries. Errors: ErrAccess, ErrExist when
// name exists (as the kernel answers before asking), ErrNotDir, else
// ErrNotPermitted.
func (f *FS) MakeEntry(dir Node, name string, c Caller) error {
	if err := f.authorize(c, fmt.Sprintf("make %q in %s", name, dir)); err != nil {
		return err
	}
	_, err := f.Lookup(dir, name)
	switch {
	case err == nil:
		return fmt.Errorf("make %q in %s: %w", name, dir, ErrExist)
	case !isNotFound(err):
		return err
	}
	return fmt.Errorf("make %q in %s: %w", name, dir, ErrNotPermitted)
}

// Mkdir is mkdir(2) of name in dir by c: in incoming/ it makes an
// incoming directory (store.MakeIncoming, durable when it returns) and
// returns its node; elsewhere it is MakeEntry. Errors: MakeEntry's, and
// store.ErrInvalidID, store.ErrExists.
func (f *FS) Mkdir(dir Node, name string, c Caller) (Node, error) {
	if err := f.enter("mkdir"); err != nil {
		return Node{}, err
	}
	defer f.leave()
	if dir.kind != KindIncomingDir {
		return Node{}, f.MakeEntry(dir, name, c)
	}
	if err := f.authorize(c, fmt.Sprintf("mkdir %q in %s", name, dir)); err != nil {
		return Node{}, err
	}
	return f.makeIncoming(name)
}

// RenameFlags are the flags of renameat2(2), decoded by the adapter.
type RenameFlags uint32

// Rename flags.
const (
	RenameNoReplace RenameFlags = 1 << iota // RENAME_NOREPLACE
	RenameExchange                          // RENAME_EXCHANGE
	RenameWhiteout                          // RENAME_WHITEOUT
)

// Rename is rename(2) of oldDir/oldName to newDir/newName by c. Two
// renames exist, both of a generation directory to the same name, with
// flags 0 or RenameNoReplace:
//
//   - generations/<gen> to tombstones/<gen>: store.Tombstone, recording
//     c's uid; granted leases keep working.
//   - tombstones/<gen> (or retiring/<gen>) to generations/<gen>:
//     store.Lift; a retiring generation is refused with store.ErrRetiring.
//
// Errors: ErrAccess, the Lookup errors for the source (a generation
// already tombstoned is not under generations/: store.ErrNotFound),
// ErrNotPermitted for every other rename, including other names and flags
// (EPERM, not EXDEV, so mv does not fall back to copy and delete:
// fuse-and-store-notes.md §C6), the store's errors. A refused rename of a
// generation (or a node in it) is remembered as its last refusal.
func (f *FS) Rename(oldDir Node, oldName string, newDir Node, newName string, flags RenameFlags, c Caller) (err error) {
	if err := f.enter("rename"); err != nil {
		return err
	}
	defer f.leave()
	src, lerr := f.Lookup(oldDir, oldName)
	gen := src.Generation()
	defer func() { f.refusals.note(gen, "rename "+oldName, err) }()
	if err := f.authorize(c, fmt.Sprintf("rename %q in %s", oldName, oldDir)); err != nil {
		return err
	}
	switch {
	case lerr != nil:
		return lerr
	case oldDir.kind == KindIncomingEntryDir:
		return f.renameIncoming(oldDir, oldName, newDir, newName, flags)
	case flags&^RenameNoReplace != 0:
		return fmt.Errorf("rename %s with flags %#x: %w", src, uint32(flags), ErrNotPermitted)
	case src.kind != KindGenerationDir || oldName != newName:
		return fmt.Errorf("rename %q in %s to %q in %s: only a generation moves, between generations/<gen> and tombstones/<gen>: %w",
			oldName, oldDir, newName, newDir, ErrNotPermitted)
	case oldDir.kind == KindGenerationsDir && newDir.kind == KindTombstonesDir:
		if _, err := f.st.Tombstone(gen, c.UID); err != nil {
			return fmt.Errorf("tombstone %s: %w", gen, err)
		}
	case newDir.kind == KindGenerationsDir && (oldDir.kind == KindTombstonesDir || oldDir.kind == KindRetiringDir):
		if _, err := f.st.Lift(gen); err != nil {
			return fmt.Errorf("lift %s: %w", gen, err)
		}
	default:
		return fmt.Errorf("rename %q in %s to %s: only generations/<gen> to tombstones/<gen> and back: %w", oldName, oldDir, newDir, ErrNotPermitted)
	}
	return nil
}
