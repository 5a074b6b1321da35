package leasefs

import (
	"fmt"
	"os"

	"templatefs/store"
)

// OpenFlags is what an open(2) asks for, decoded from the platform's flags
// by the adapter.
type OpenFlags struct {
	Write     bool // O_WRONLY or O_RDWR
	Truncate  bool // O_TRUNC
	Append    bool // O_APPEND: only incoming files take it (and Create: ackAtCreate)
	Exclusive bool // O_EXCL: only Create looks at it
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

// closeFiles closes what h holds open, for an open that fails after
// Open returned h.
func (h Handle) closeFiles() {
	for _, file := range []*os.File{h.File, h.Snapshot} {
		if file != nil {
			file.Close()
		}
	}
	if h.Events != nil {
		h.Events.Close()
	}
	if h.Incoming != nil {
		h.Incoming.File.Close()
		h.Incoming.Released()
	}
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

// Create is open(2) with O_CREAT and flags fl of name in dir by c; it
// returns the file with its attributes and its open handle (Created).
// If name exists, fl.Exclusive (O_EXCL) gives ErrExist; otherwise the
// existing node is opened with fl as Open does (a retried create of a
// lease just opens it, with its command stream). A new name is allowed
// only in an incoming directory (an incoming file), in a generation's
// leases directory, where it reserves a lease on that generation with
// store.ReserveLease (refused by the store under tombstones/ and
// retiring/), and in keys/<key-id>/leases/, where it reserves one on the
// key's newest eligible published generation with
// store.ReserveLeaseByKey.
//
// A new lease is acknowledged at close, not here, unless fl has O_TRUNC
// or O_APPEND (ackAtCreate: shell redirections): Create returns as soon
// as the lease is reserved, and its record is committed by a group commit
// shared with concurrent creates; the handle's Commands.Flush (each
// close(2), FLUSH) waits for that commit and returns its error, in which
// case the lease does not exist. With O_TRUNC or O_APPEND, Create itself
// waits and returns the commit's error. Until the commit ends, the lease is
// visible to no one else: listings leave it out, and a lookup of its name
// (a stat, cat, rm, write, a second create) waits for the commit
// (store.Reservation). Errors: ErrAccess, ErrNotPermitted for a new name
// elsewhere, ErrNotDir, Open's errors for an existing node, the store's
// store.ErrInvalidID, store.ErrNotFound, store.ErrTombstoned,
// store.ErrRetiring, store.ErrIneligible, store.ErrLeaseConflict,
// store.ErrReadOnly. A refusal in a generation's leases directory is
// remembered as its last refusal.
func (f *FS) Create(dir Node, name string, fl OpenFlags, c Caller) (cr Created, err error) {
	if err := f.enter("create"); err != nil {
		return Created{}, err
	}
	defer f.leave()
	defer func() { f.refusals.note(dir.Generation(), "create "+name, err) }()
	if err := f.authorize(c, fmt.Sprintf("create %q in %s", name, dir)); err != nil {
		return Created{}, err
	}
	if dir.kind == KindIncomingEntryDir {
		return f.createIncoming(dir, name, fl.Exclusive)
	}
	// A leases directory holds only leases, and the reservation itself
	// finds an existing one (a retry, Created false) or refuses a clone
	// leased elsewhere; no Lookup first, which would read the store again
	// while the kernel holds the directory's lock.
	var r *store.Reservation
	switch dir.kind {
	case KindGenerationLeasesDir:
		r, err = f.st.ReserveLease(dir.Generation(), name)
	case KindKeyLeasesDir:
		r, err = f.st.ReserveLeaseByKey(dir.name, name)
	default:
		existing, err := f.Lookup(dir, name)
		switch {
		case err == nil && fl.Exclusive:
			return Created{}, fmt.Errorf("create %q in %s: %w", name, dir, ErrExist)
		case err == nil:
			return f.openExisting(existing, fl, c)
		case !isNotFound(err):
			return Created{}, err
		}
		return Created{}, fmt.Errorf("create %q in %s: files are created only in leases directories of a generation or key: %w", name, dir, ErrNotPermitted)
	}
	switch {
	case err != nil:
		return Created{}, fmt.Errorf("create lease %q in %s: %w", name, dir, err)
	case !r.Created && fl.Exclusive:
		return Created{}, fmt.Errorf("create lease %q in %s: %w", name, dir, ErrExist)
	}
	if fl.ackAtCreate() {
		if err := r.Wait(); err != nil {
			return Created{}, fmt.Errorf("create lease %q in %s: %w", name, dir, err)
		}
	}
	n, err := objectNode(KindLeaseFile, r.Lease.Seq, r.Lease.CloneID)
	if err != nil {
		return Created{}, err
	}
	a, data, err := f.leaseAttr(n, r.Lease)
	if err != nil {
		return Created{}, err
	}
	cmd := f.commands(n)
	if r.Created {
		cmd.created = &createdLease{res: r, dir: dir, attr: a}
	}
	return Created{Node: n, Attr: a, Handle: Handle{Data: data, Commands: cmd}}, nil
}

// ackAtCreate reports whether a create with flags fl waits for its new
// lease's commit before it returns, as every create did before the
// acknowledgement moved to the close: O_TRUNC or O_APPEND, the opens of
// shell redirections (`: > f`, `echo ... > f`, `>> f`), fopen "w" and
// "a", Go's os.Create. Shells ignore the result of the close of a
// redirection (dash and bash exit 0 when it fails), so for them the
// create must be the acknowledgement. Every other create (touch, which
// reports a failed close; open(O_CREAT) and open(O_CREAT|O_EXCL) callers
// that check close(2)) is acknowledged at close.
func (fl OpenFlags) ackAtCreate() bool { return fl.Truncate || fl.Append }

// openExisting is Create of a name that exists: an open of node n with
// fl. The attributes are those at the open (OpenAttr), so adapters answer
// the create(2) from them rather than reading the store again.
func (f *FS) openExisting(n Node, fl OpenFlags, c Caller) (Created, error) {
	h, err := f.Open(n, fl, c)
	if err != nil {
		return Created{}, err
	}
	a, err := f.OpenAttr(n, h)
	if err != nil {
		h.closeFiles()
		return Created{}, err
	}
	return Created{Node: n, Attr: a, Handle: h}, nil
}

// Created is the file that Create made or opened, with its attributes as
// of the create and its open handle. Adapters answer the create(2) from
// it rather than reading the store again: another caller may release the
// lease in between, and the create must still succeed, like an
// open(O_CREAT) of a file that is unlinked right after.
type Created struct {
	Node   Node
	Attr   Attr
	Handle Handle
}

// Durable waits until the lease this create made is durable, and returns
// the error of its commit (then the lease does not exist); nil at once
// for anything else. It is Commands.Flush's wait, for adapters on a
// platform whose close reports no error to the caller (WinFsp: its
// CloseHandle cannot fail): they wait here, before answering the create,
// so that the create is the acknowledgement there.
func (cr Created) Durable() error {
	if cr.Handle.Commands == nil {
		return nil
	}
	return cr.Handle.Commands.awaitCreated()
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
