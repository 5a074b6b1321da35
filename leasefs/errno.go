package leasefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"syscall"

	"templatefs/store"
)

// Errno is the platform-neutral errno an operation on the mount fails
// with. Adapters map each value, by name, to their platform's number
// (syscall.Errno in package fs, cgofuse's negative constants in winfsp).
type Errno int

// Errno values. Errno.Doc and docs/errno.md say what each means on the mount.
const (
	OK Errno = iota
	ENOENT
	EEXIST
	EPERM
	EACCES
	EINVAL
	EBUSY
	EROFS
	ENOTDIR
	EISDIR
	EOVERFLOW
	ESRCH
	ETIMEDOUT
	EIO
	ENOSPC
	EOPNOTSUPP
	ENOTEMPTY
	ENOTCONN
	EINTR
	ENOSYS
)

var errnoNames = [...]string{
	OK: "OK", ENOENT: "ENOENT", EEXIST: "EEXIST", EPERM: "EPERM", EACCES: "EACCES", EINVAL: "EINVAL", EBUSY: "EBUSY",
	EROFS: "EROFS", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", EOVERFLOW: "EOVERFLOW", ESRCH: "ESRCH", ETIMEDOUT: "ETIMEDOUT", EIO: "EIO",
	ENOSPC: "ENOSPC", EOPNOTSUPP: "EOPNOTSUPP", ENOTEMPTY: "ENOTEMPTY", ENOTCONN: "ENOTCONN", EINTR: "EINTR", ENOSYS: "ENOSYS",
}

// errnoDocs says what each Errno means on the mount.
var errnoDocs = [...]string{
	OK:         "success",
	ENOENT:     "no such name: the generation, key or lease does not exist, or is not in this directory (a generation is listed only under the directory of its state, generations/, tombstones/ or retiring/; a lease only under its own generation and key)",
	EEXIST:     "the name exists: O_EXCL create of an existing lease or file, mkdir/mknod/symlink/link of an existing name",
	EPERM:      "the operation is not part of the tree's contract at that place; or the generation refuses it by state (new leases, or binding a reserved lease, also by a payload open carrying its launch ID, on a tombstoned, retiring or ineligible generation, retiring a published one, lifting a retiring one); or the daemon may not inspect the process a lease is bound to, so it cannot verify the exit a release needs",
	EACCES:     "the caller is neither the store owner nor root: only they may change the tree, other users may only read; without allow_other the kernel refuses other users everything with EACCES",
	EINVAL:     "a bad value: a lease name that is not a clone ID, or a command line that is not one of the lease or ctl file's grammar (from write(2), or from close(2) for a last line without newline); a refused `publish` of an incoming directory: a bad capture, or one already published; from the kernel: ftruncate(2) of a descriptor not open for writing, readlink(2) of a file",
	EBUSY:      "the clone ID is already leased on another generation or key, the lease is bound to another process, its bound process is still running, the lease is reserved (rm and kill: write cancel to end it), a process still carries its launch ID (cancel), or a retiring generation still holds leases; an incoming directory is being published (`publish`, or any change of its files) or has a file open for writing (`publish`)",
	EROFS:      "the node is immutable: payloads, rendered files and fixed directories take no write-open, truncate, chmod, chown, utimes or xattr change; or the whole store is read-only (`read_only` in `MNT/store` says why) and takes no change at all",
	ENOTDIR:    "a directory operation named a file",
	EISDIR:     "a file operation named a directory",
	EOVERFLOW:  "an object number does not fit an inode number (above 2^56-1)",
	ESRCH:      "a `pid N` write names no running process (or a thread that is not a thread-group leader, or a process that has exited)",
	ETIMEDOUT:  "a `kill` write: the bound process was still there when the bounded wait ended, or could not be signalled; the lease stays, in state teardown-failed",
	EIO:        "store I/O failed or the index is damaged (including a malformed settings row; damage found while mounted also makes the store read-only); an error without a row in the table is logged with its whole chain",
	ENOSPC:     "the store's file system is full: the change was not made",
	EOPNOTSUPP: "the tree has no such operation for any file: fallocate(2) of a lease or ctl file",
	ENOTEMPTY:  "rmdir of an incoming directory that still holds files (`rm -r` removes them; a published one is empty)",
	ENOTCONN:   "the daemon serving this (detached) mount has stopped and released the store to a new daemon: files opened before keep reading, anything else (lookup, stat, listing, a new open, a write to an open lease or ctl file) fails; a killed daemon's dead mount gives it too, from the kernel",
	EINTR:      "a read of `events` was interrupted by a signal while it waited for an event; nothing was lost",
	ENOSYS:     "getxattr(2) and listxattr(2): the tree has no extended attributes (the payload digests are in `<gen>/SHA256SUMS`). The daemon answers the first one ENOSYS; the Linux kernel then stops asking it and answers every xattr read itself, so callers see EOPNOTSUPP",
}

// String returns the errno's name, e.g. "EROFS".
func (e Errno) String() string {
	if e >= 0 && int(e) < len(errnoNames) {
		return errnoNames[e]
	}
	return fmt.Sprintf("Errno(%d)", int(e))
}

// Doc returns one line saying what the errno means on the mount.
func (e Errno) Doc() string {
	if e >= 0 && int(e) < len(errnoDocs) {
		return errnoDocs[e]
	}
	return ""
}

// Errnos returns every Errno value, OK first, so adapters can test that
// their mapping is exhaustive.
func Errnos() []Errno {
	out := make([]Errno, len(errnoNames))
	for i := range out {
		out[i] = Errno(i)
	}
	return out
}

// ErrnoRow is one row of the error table: errors matching Err (errors.Is)
// fail with Errno.
type ErrnoRow struct {
	Err    error
	Name   string // how docs name Err, e.g. "store.ErrNotFound"
	Errno  Errno
	Reason string // when it happens, one line
}

// errnoTable is the one error table of templatefs, in match order. Choices
// follow fuse-and-store-notes.md §C6: EEXIST for an existing lease, EPERM
// (not EXDEV, so mv does not fall back to copy and delete) for renames
// outside the allowed transitions and for a generation whose state
// refuses the operation (a refusal per object), EROFS for immutable
// content, EINVAL for bad values, EBUSY for an object held elsewhere or
// still in use. EACCES is kept for the caller's own permission (project
// issue 3), so a process the daemon cannot inspect gets EPERM instead:
// on a lease file no other refusal answers EPERM, so it stays
// distinguishable from EBUSY (alive) and EACCES (not the owner). A failed
// `kill` is ETIMEDOUT, not EBUSY: unlike a refused rm it changed the
// lease (state teardown-failed), and the caller must be able to tell.
var errnoTable = []ErrnoRow{
	{ErrAccess, "leasefs.ErrAccess", EACCES, "a create, unlink, rmdir, rename, write, write-open, setattr or xattr change by a uid other than the store owner and root; nothing changes"},
	{store.ErrReadOnly, "store.ErrReadOnly", EROFS, "any change (lease create, bind, kill or release, tombstone, lift, retire) while the store is read-only: the index showed damage or an fsync failed since the daemon started; `read_only` in `MNT/store` gives the reason, and only a restart clears it; nothing changes"},
	{store.ErrIndexCorrupt, "store.ErrIndexCorrupt", EIO, "the operation read a damaged index page (a bbolt assertion or a fault on the mapped file); it fails, the damage is logged and the store turns read-only"},
	{store.ErrNotFound, "store.ErrNotFound", ENOENT, "the generation, key or lease does not exist, or is not under this directory"},
	{store.ErrInvalidID, "store.ErrInvalidID", EINVAL, "a created lease name is not a clone ID: 1 to 128 bytes of `[A-Za-z0-9._-]`, not starting with `.` or `-`"},
	{store.ErrTombstoned, "store.ErrTombstoned", EPERM, "creating a lease on a tombstoned generation, or binding a reserved lease on it (`pid N`, or opening a payload with the lease's `TEMPLATEFS_LAUNCH_ID`); bound leases keep working (fuse-and-store-notes.md §C6: a refusal per object)"},
	{store.ErrRetiring, "store.ErrRetiring", EPERM, "creating a lease on a retiring generation, or binding a reserved lease on it, or lifting it (`mv retiring/<gen> generations/<gen>`, `echo lift > ctl`)"},
	{store.ErrNotTombstoned, "store.ErrNotTombstoned", EPERM, "retiring a published generation (`rmdir generations/<gen>`, `echo retire > ctl`): only tombstoned generations can be retired"},
	{store.ErrIneligible, "store.ErrIneligible", EPERM, "creating a lease, or binding a reserved one (`pid N`, or opening a payload with the lease's `TEMPLATEFS_LAUNCH_ID`: the open fails), on a generation outside its restore window, on a capture of this boot whose wall-clock and monotonic anchors disagree by more than the window, or refused by the store's reboot/other-host policy, or on a key with no such generation; `status` gives the reason"},
	{store.ErrLeaseConflict, "store.ErrLeaseConflict", EBUSY, "creating a lease whose clone ID already holds a lease on another generation (or, under `keys/<key-id>/leases/`, another key)"},
	{store.ErrLeaseBound, "store.ErrLeaseBound", EBUSY, "`pid N` to a lease bound to another process, even one that has exited: release it and acquire a new lease; `cancel` of a bound lease (rm it once its process has exited, or kill it)"},
	{store.ErrNoProcess, "store.ErrNoProcess", ESRCH, "`pid N` names no process, a thread that is not a thread-group leader, or a process that has exited"},
	{store.ErrTeardownFailed, "store.ErrTeardownFailed", ETIMEDOUT, "`kill`: after SIGKILL the process was still there when the wait (Options.KillWait, default " + DefaultKillWait.String() + ") ended, or it could not be signalled; the lease stays, state `teardown-failed`"},
	{store.ErrProcessAlive, "store.ErrProcessAlive", EBUSY, "removing a lease whose bound process is still running; the lease stays"},
	{store.ErrProcessUninspectable, "store.ErrProcessUninspectable", EPERM, "removing, binding or killing a lease whose process exists but cannot be inspected (for example /proc with hidepid); nothing changes"},
	{store.ErrLeaseReserved, "store.ErrLeaseReserved", EBUSY, "reserved lease: write cancel to end it. `rm` (and so `mv` out of the mount, which copies and then unlinks) and `kill` of a lease that was never bound; the lease stays"},
	{store.ErrLaunchInUse, "store.ErrLaunchInUse", EBUSY, "`cancel` while a process of this boot carries the lease's launch ID in its initial environment (`TEMPLATEFS_LAUNCH_ID`); the lease stays"},
	{ErrRetirementPending, "leasefs.ErrRetirementPending", EBUSY, "`rmdir retiring/<gen>`: the generation is already retiring and leaves when its last lease is released"},
	{store.ErrUnsafePath, "store.ErrUnsafePath", EIO, "open or stat of a payload file with more than one hard link (another name could change it; `fsck` reports `artifact-links`) or reached through a symbolic link swapped into the store; the log names the file"},
	{store.ErrInvalidSettings, "store.ErrInvalidSettings", EIO, "creating a lease while the store's settings row is malformed or names an unknown field (a newer build's policy is never loosened)"},
	{ErrExist, "leasefs.ErrExist", EEXIST, "O_EXCL create of an existing lease or file; mkdir, mknod, symlink or link of an existing name"},
	{ErrReadOnly, "leasefs.ErrReadOnly", EROFS, "write-open, truncate, chmod, chown, utimes or xattr change of a payload, rendered file or fixed directory"},
	{ErrNotPermitted, "leasefs.ErrNotPermitted", EPERM, "create outside the leases directories of a generation or key, mkdir, mknod, symlink, link, rmdir of anything but a generation, unlink outside leases directories, rename other than `generations/<gen>` to `tombstones/<gen>` and back, chmod, chown or xattr change of lease and ctl files"},
	{ErrBadWrite, "leasefs.ErrBadWrite", EINVAL, "a command line written to a lease or ctl file that is not one command of its grammar (see docs/leases.md), or longer than " + strconv.Itoa(MaxCommandLen) + " bytes; from write(2), or from close(2) for a last line without newline"},
	{ErrNotDir, "leasefs.ErrNotDir", ENOTDIR, "lookup, readdir or create below a file"},
	{ErrIsDir, "leasefs.ErrIsDir", EISDIR, "open of a directory as a file"},
	{ErrNotSupported, "leasefs.ErrNotSupported", EOPNOTSUPP, "fallocate(2) of a lease or ctl file: they take commands, not data"},
	{ErrInoOverflow, "leasefs.ErrInoOverflow", EOVERFLOW, "generation ID or sequence number above 2^56-1 has no inode number"},
	{context.Canceled, "context.Canceled", EINTR, "a read of `events` waiting for an event was interrupted (FUSE INTERRUPT: the reader got a signal); the next read returns what came meanwhile"},
	{fs.ErrInvalid, "fs.ErrInvalid", EINVAL, "a path given to Walk is not an io/fs path"},
	{syscall.ENOSPC, "syscall.ENOSPC", ENOSPC, "a lease, bind, release, tombstone, lift or retirement found the store's file system full (a payload write or an index commit); nothing changed. A failed index commit also makes the store read-only"},
	{ErrIncomingBusy, "leasefs.ErrIncomingBusy", EBUSY, "`publish` to `incoming/<name>/ctl` while a file of the directory is open for writing, or a publication of it runs (then already the open of `ctl` for writing, at once; `status` keeps saying `publishing`); a write-open, create, truncate, rename or unlink in it while it is being published"},
	{store.ErrNotEmpty, "store.ErrNotEmpty", ENOTEMPTY, "rmdir of `incoming/<name>` while it holds files"},
	{store.ErrExists, "store.ErrExists", EEXIST, "mkdir of an existing `incoming/<name>`"},
	{store.ErrCaptureChanged, "store.ErrCaptureChanged", EBUSY, "`publish`: an artifact changed while it was hashed; publish again once nothing writes to it"},
	{store.ErrCapture, "store.ErrCapture", EINVAL, "`publish` of an incoming directory whose capture is refused: no or a bad `class.json`, a manifest that does not validate, a missing, extra or mis-sized artifact, an artifact with more than one hard link (checked before a publication ID is reserved); `status` gives the reason, nothing changes (no generation ID is used up)"},
	{ErrDetached, "leasefs.ErrDetached", ENOTCONN, "any lookup, stat, listing, open, or write to an open lease or ctl file served by a daemon that got SIGTERM or SIGINT: it has detached its mount and closed the store (a new daemon may own it, at the same mountpoint); open payload files, index snapshots and texts keep reading; nothing changes"},
	{syscall.EIO, "syscall.EIO", EIO, "a payload write, fsync or index commit of the store failed with an I/O error; nothing changed. A failed fsync or commit also makes the store read-only (`store` shows the reason) until the daemon restarts"},
	{ErrNoXattrs, "leasefs.ErrNoXattrs", ENOSYS, "getxattr(2) or listxattr(2) of any node, answered without a store read; callers see EOPNOTSUPP (the kernel's answer to ENOSYS), and after the first the kernel asks no more"},
	{ErrIncomingPublished, "leasefs.ErrIncomingPublished", EINVAL, "`publish` of an incoming directory this daemon has published already: the reason names the generation and `status` keeps saying `published <gen>`; after a restart the emptied directory is refused as a capture without `class.json` (`store.ErrCapture`)"},
}

// OtherErrno is an errno that reaches callers of the mount without a
// leasefs error: the kernel answers the call itself, or an adapter does
// for a request that leasefs has no method for.
type OtherErrno struct {
	Name string // e.g. "ENODEV"
	By   string // "kernel" or "adapter"
	When string // one line
}

// otherErrnos are the OtherErrnos, found by probing both backends
// (tests/conformance, case Errnos, checks each).
var otherErrnos = []OtherErrno{
	{"EBADF", "kernel", "write(2), fallocate(2), an fcntl(2) write lock or copy_file_range(2) into a descriptor not open for writing (only lease and ctl files open for writing)"},
	{"EINVAL", "kernel", "ftruncate(2) of a descriptor not open for writing; readlink(2) of a file (the tree has no symbolic links)"},
	{"ENODEV", "kernel", "go-fuse: mmap(2) of a text, lease or ctl file or `store.db`, which are served with direct I/O (cgofuse maps them); copy `store.db` out before opening it with bbolt tools"},
	{"EACCES", "kernel", "mmap(2) of a descriptor not open for reading; a writable shared mapping of a payload (payloads open read-only)"},
	{"ENOTTY", "kernel", "ioctl(2) on any file of the mount, for example FS_IOC_GETFLAGS as lsattr asks: the tree has no ioctls"},
	{"EXDEV", "kernel", "copy_file_range(2) between the mount and another filesystem; cp and rsync fall back to read and write"},
	{"ESPIPE", "kernel", "lseek(2), pread(2) or pwrite(2) of `events`: a stream, opened without offsets"},
	{"EOPNOTSUPP", "kernel", "open(2) with O_TMPFILE; on cgofuse, fallocate(2) (libfuse has no fallocate callback: the kernel answers for it); getxattr(2) and listxattr(2) of any file (`leasefs.ErrNoXattrs`: the daemon's ENOSYS becomes EOPNOTSUPP)"},
}

// OtherErrnos returns a copy of the OtherErrnos.
func OtherErrnos() []OtherErrno { return append([]OtherErrno(nil), otherErrnos...) }

// ErrnoTable returns a copy of the error table, in match order.
func ErrnoTable() []ErrnoRow { return append([]ErrnoRow(nil), errnoTable...) }

// match returns the errno of the first row err matches, and whether one did.
func match(err error) (Errno, bool) {
	r, ok := matchRow(err)
	return r.Errno, ok
}

// matchRow returns the first row err matches, and whether one did; for
// none, a row with errno EIO and no name.
func matchRow(err error) (ErrnoRow, bool) {
	if err == nil {
		return ErrnoRow{Errno: OK}, true
	}
	for _, r := range errnoTable {
		if errors.Is(err, r.Err) {
			return r, true
		}
	}
	return ErrnoRow{Errno: EIO}, false
}

// ToErrno maps err to an Errno: nil is OK, else the first row of the table
// that errors.Is matches. An error without a row is EIO and is logged at
// error level on slog.Default() with its whole chain.
func ToErrno(err error) Errno {
	e, ok := match(err)
	if !ok {
		slog.Error("unmapped error, answering EIO", "err", err.Error(), "chain", chain(err))
	}
	return e
}

// chain lists the dynamic type of every error in err's tree, depth first.
func chain(err error) string {
	var parts []string
	var walk func(error)
	walk = func(e error) {
		parts = append(parts, fmt.Sprintf("%T", e))
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				walk(next)
			}
		case interface{ Unwrap() []error }:
			for _, next := range u.Unwrap() {
				walk(next)
			}
		}
	}
	walk(err)
	return strings.Join(parts, " -> ")
}

// ErrnoMarkdown renders docs/errno.md from the Errno docs and the error
// table; a golden test keeps the file equal to it. Reasons write paths and
// other literal text as code spans, so <gen> survives Markdown rendering.
func ErrnoMarkdown() string {
	var b strings.Builder
	b.WriteString("# templatefs errno table\n\n")
	b.WriteString("Generated from `leasefs/errno.go` by `go test ./leasefs -run TestErrnoMarkdown -update`; do not edit.\n")
	b.WriteString("Adapters map each value by name to the platform's number (`fs/errno.go`: `syscall.Errno`).\n")
	b.WriteString("Every refused mutation is also logged once, with op, path, errno and the error text.\n\n")
	b.WriteString("## Values\n\n| errno | meaning on the mount |\n|---|---|\n")
	for _, e := range Errnos() {
		fmt.Fprintf(&b, "| %s | %s |\n", e, mdCell(e.Doc()))
	}
	b.WriteString("\n## Errors to errno\n\nFirst `errors.Is` match wins; an error matching no row is EIO, logged with its whole chain.\n\n")
	b.WriteString("| # | error | errno | when |\n|---|---|---|---|\n")
	for i, r := range errnoTable {
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s |\n", i+1, r.Name, r.Errno, mdCell(r.Reason))
	}
	b.WriteString("\n## Errnos without a leasefs error\n\nThe kernel answers these calls itself, or an adapter does for a request leasefs has no method for; nothing is logged.\n\n")
	b.WriteString("| errno | by | when |\n|---|---|---|\n")
	for _, o := range otherErrnos {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", o.Name, o.By, mdCell(o.When))
	}
	return b.String()
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Refuse maps err with the error table and logs one warning line with op,
// path, errno and the error text (an error without a row is EIO, logged at
// error level with its chain) and counts it (Options.Observer, by errno and row name); nil is OK and not logged. Adapters call it for every failed mutation,
// passing the path as they know it.
func (f *FS) Refuse(op, path string, err error) Errno {
	if err == nil {
		return OK
	}
	r, ok := matchRow(err)
	e := r.Errno
	if f.obs != nil {
		reason := r.Name
		if !ok {
			reason = unmatchedReason
		}
		f.obs.Refused(e.String(), reason)
	}
	if !ok {
		f.log.Error("refused", "op", op, "path", path, "errno", e.String(), "err", err.Error(), "chain", chain(err))
		return e
	}
	f.log.Warn("refused", "op", op, "path", path, "errno", e.String(), "err", err.Error())
	return e
}
