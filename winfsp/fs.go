//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"io"
	"math"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// noHandle is the fh cgofuse passes when a call has no open handle.
const noHandle = ^uint64(0)

// closeReportsErrors says whether close(2) returns what Flush returns.
// libfuse passes a FLUSH's error to close(2); WinFsp's FUSE layer calls
// flush from its Close, whose result reaches no one (CloseHandle cannot
// fail), so there a create waits for its lease's commit (Create).
const closeReportsErrors = runtime.GOOS != "windows"

// handle is one open file: the leasefs node it was opened on (later
// operations on the handle use it, not the path: WinFsp keeps the path it
// opened with across a rename, fuse-and-store-notes.md §G3) and what
// leasefs.FS.Open returned.
type handle struct {
	node leasefs.Node
	h    leasefs.Handle
	// path is the path it was opened at, and attr its attributes at open
	// (leasefs.FS.OpenAttr, for Getattr's fallback: heldAttr), if hasAttr.
	path    string
	attr    leasefs.Attr
	hasAttr bool
}

// fileSystem is the cgofuse FileSystemInterface over one leasefs.FS. Every
// path callback walks its path with leasefs.FS.Walk and calls one leasefs
// method; it keeps only the table of open handles.
type fileSystem struct {
	fuse.FileSystemBase
	lfs  *leasefs.FS
	init func() // called once from Init: the mount is serving

	// requests, if set, counts Getattr callbacks (libfuse answers each
	// LOOKUP and GETATTR with one), so tests can measure what the kernel
	// caches (docs/windows.md, "Timeouts"). Set before the mount.
	requests *atomic.Int64
	// getxattrs and listxattrs, if set, count Getxattr and Listxattr
	// callbacks, so tests can check that the kernel stops asking. Set
	// before the mount.
	getxattrs, listxattrs *atomic.Int64

	mu      sync.Mutex
	handles map[uint64]*handle
	dirs    map[uint64]*dirCursor // open directories (dir.go)
	next    uint64                // the last handle number given out, file or directory
}

// newFileSystem serves lfs; on Windows it first tells lfs who may change
// the tree in WinFsp's uid space (platformOwners). Errors: reading the
// root's attributes, or platformOwners'.
func newFileSystem(lfs *leasefs.FS, ready func()) (*fileSystem, error) {
	if _, err := lfs.Attr(lfs.Root()); err != nil {
		return nil, err
	}
	owners, err := platformOwners()
	if err != nil {
		return nil, err
	}
	if owners != nil {
		lfs.SetOwners(owners)
	}
	return &fileSystem{lfs: lfs, init: ready, handles: map[uint64]*handle{}, dirs: map[uint64]*dirCursor{}}, nil
}

// rel turns a cgofuse path ("/", "/generations/g000001") into the io/fs
// path leasefs.FS.Walk takes.
func rel(p string) string {
	if p = strings.TrimPrefix(path.Clean("/"+p), "/"); p == "" {
		return "."
	}
	return p
}

// walk resolves a cgofuse path to its node.
func (f *fileSystem) walk(p string) (leasefs.Node, error) { return f.lfs.Walk(rel(p)) }

// parent resolves the directory of p and returns it with p's last element.
func (f *fileSystem) parent(p string) (leasefs.Node, string, error) {
	dir, name := path.Split(path.Clean("/" + p))
	n, err := f.walk(dir)
	return n, name, err
}

// refuse maps the error of a refused mutation, logging it once.
func (f *fileSystem) refuse(op, p string, err error) int {
	return toFuse(f.lfs.Refuse(op, rel(p), err))
}

// add records open handle h of n, opened at path p, and returns its
// number, with the handle's attributes at open, for Getattr: a payload's
// from another open handle of n (payloads never change), else from
// leasefs.FS.OpenAttr now. If a payload's cannot be read, its file is
// closed and add returns the errno; any other handle then just has none.
func (f *fileSystem) add(n leasefs.Node, p string, h leasefs.Handle) (int, uint64) {
	attr, held := leasefs.Attr{}, false
	if h.File != nil {
		attr, held = f.payloadAttr(n)
	}
	if !held {
		var err error
		attr, err = f.lfs.OpenAttr(n, h)
		held = err == nil
		if h.File != nil && err != nil {
			h.File.Close()
			return errnoOf(err), noHandle
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.handles[f.next] = &handle{node: n, path: rel(p), h: h, attr: attr, hasAttr: held}
	return 0, f.next
}

// payloadAttr returns the attributes of a payload open at node n, if one is.
func (f *fileSystem) payloadAttr(n leasefs.Node) (leasefs.Attr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.handles {
		if h.h.File != nil && h.node == n {
			return h.attr, true
		}
	}
	return leasefs.Attr{}, false
}

// heldAttr returns the attributes at open of handle fh, else of a file
// open at node n or at path p (as opened: libfuse keeps the old daemon's
// paths), if one is and has them.
func (f *fileSystem) heldAttr(fh uint64, n leasefs.Node, p string) (leasefs.Attr, bool) {
	detached := f.lfs.Detached()
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.handles[fh]; ok && fh != noHandle && h.hasAttr {
		return h.attr, true
	}
	// By node or path only for a payload (its bytes never change, so a
	// retired generation's open payload keeps its attributes), or once the
	// daemon has detached: a live lease or text file that is gone is gone,
	// even while a descriptor of it waits for its RELEASE.
	for _, h := range f.handles {
		if h.hasAttr && (h.node == n || h.path == p) && (detached || h.h.File != nil) {
			return h.attr, true
		}
	}
	return leasefs.Attr{}, false
}

// openFiles counts the open handles: of payload files, and of all others.
func (f *fileSystem) openFiles() (payload, other int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.handles {
		if h.h.File != nil {
			payload++
		} else {
			other++
		}
	}
	return payload, other
}

func (f *fileSystem) get(fh uint64) (*handle, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.handles[fh]
	return h, ok
}

// node returns the node of open handle fh, else resolves p.
func (f *fileSystem) node(p string, fh uint64) (leasefs.Node, error) {
	if h, ok := f.get(fh); ok && fh != noHandle {
		return h.node, nil
	}
	return f.walk(p)
}

func fillStat(a leasefs.Attr, st *fuse.Stat_t) {
	*st = fuse.Stat_t{
		Ino:      a.Ino,
		Mode:     uint32(a.Mode.Perm()) | fuse.S_IFREG,
		Nlink:    a.Nlink,
		Uid:      a.UID,
		Gid:      a.GID,
		Size:     a.Size,
		Atim:     fuse.NewTimespec(a.Atime),
		Mtim:     fuse.NewTimespec(a.Mtime),
		Ctim:     fuse.NewTimespec(a.Ctime),
		Birthtim: fuse.NewTimespec(a.Mtime),
		Blksize:  int64(a.Blksize),
		Blocks:   a.Blocks,
	}
	if a.Mode.IsDir() {
		st.Mode = uint32(a.Mode.Perm()) | fuse.S_IFDIR
	}
}

// Init reports that the file system is serving.
func (f *fileSystem) Init() { f.init() }

// Statfs reports a 4 KiB block size and 255-byte names; the tree has no
// free space to report.
func (f *fileSystem) Statfs(p string, st *fuse.Statfs_t) int {
	*st = fuse.Statfs_t{Bsize: 4096, Frsize: 4096, Namemax: 255}
	return 0
}

// Getattr reports leasefs.FS.Attr of the open handle's node, else of the
// path's. When leasefs cannot answer (the daemon has detached:
// leasefs.ErrDetached, or the generation was retired) and a file is open
// at that handle (or, for a payload or once detached, at that node or
// path), it answers from the attributes taken at that open (heldAttr: the
// size of its text or snapshot): fstat(2), which
// reaches libfuse without a handle, and the kernel's revalidation before
// a read (auto_inval_data) must keep working on every file still served.
func (f *fileSystem) Getattr(p string, st *fuse.Stat_t, fh uint64) int {
	countCall(f.requests)
	n, err := f.node(p, fh)
	a := leasefs.Attr{}
	if err == nil {
		a, err = f.lfs.Attr(n)
	}
	if err != nil {
		held, ok := f.heldAttr(fh, n, rel(p))
		if !ok {
			return errnoOf(err)
		}
		a = held
	}
	fillStat(a, st)
	return 0
}

func openFlags(flags int) leasefs.OpenFlags {
	return leasefs.OpenFlags{
		Write:     flags&fuse.O_ACCMODE != fuse.O_RDONLY,
		Truncate:  flags&fuse.O_TRUNC != 0,
		Append:    flags&fuse.O_APPEND != 0,
		Exclusive: flags&fuse.O_EXCL != 0,
	}
}

// Open opens a file with leasefs.FS.Open: a payload's backing file, or a
// snapshot of a rendered text taken now.
func (f *fileSystem) Open(p string, flags int) (int, uint64) {
	n, err := f.walk(p)
	if err != nil {
		return errnoOf(err), noHandle
	}
	of := openFlags(flags)
	h, err := f.lfs.Open(n, of, f.callerOf())
	if err != nil {
		return toFuse(f.lfs.OpenErrno(rel(p), of, err)), noHandle
	}
	return f.add(n, p, h)
}

// Create reserves a lease, creates an incoming file, or opens an
// existing name, with leasefs.FS.Create; elsewhere leasefs refuses. A new
// lease is acknowledged where the platform can report an error: at
// close through libfuse (Flush waits for its commit), at the create
// itself on WinFsp, whose close reports nothing (closeReportsErrors).
func (f *fileSystem) Create(p string, flags int, mode uint32) (int, uint64) {
	dir, name, err := f.parent(p)
	if err != nil {
		return errnoOf(err), noHandle
	}
	cr, err := f.lfs.Create(dir, name, openFlags(flags), f.callerOf())
	if err == nil && !closeReportsErrors {
		err = cr.Durable()
	}
	if err != nil {
		return f.refuse("create", p, err), noHandle
	}
	return f.add(cr.Node, p, cr.Handle)
}

// file returns the open file behind a handle: a payload's or incoming
// file's backing file or store.db's index snapshot; nil for a rendered
// text.
func (h *handle) file() *os.File {
	switch {
	case h.h.File != nil:
		return h.h.File
	case h.h.Incoming != nil:
		return h.h.Incoming.File
	}
	return h.h.Snapshot
}

// Read serves a payload from its backing file, store.db from its index
// snapshot, the events file from its stream (readEvents: it blocks) and a
// text from the rendering taken at open.
func (f *fileSystem) Read(p string, buff []byte, ofst int64, fh uint64) int {
	h, ok := f.get(fh)
	if !ok {
		return -fuse.EBADF
	}
	if h.h.Events != nil {
		return readEvents(h.h.Events, buff)
	}
	if file := h.file(); file != nil {
		n, err := file.ReadAt(buff, ofst)
		if err != nil && err != io.EOF {
			return -fuse.EIO
		}
		return n
	}
	if ofst >= int64(len(h.h.Data)) {
		return 0
	}
	return copy(buff, h.h.Data[ofst:])
}

// Write passes each write to the handle's leasefs.Commands (opens of
// lease and ctl files for writing; every other open refuses writing).
func (f *fileSystem) Write(p string, buff []byte, ofst int64, fh uint64) int {
	h, ok := f.get(fh)
	if ok && h.h.Incoming != nil {
		return writeIncoming(h.h.Incoming, buff, ofst)
	}
	if !ok || h.h.Commands == nil {
		return -fuse.EBADF
	}
	n, err := h.h.Commands.Write(buff, f.callerOf())
	if err != nil {
		return f.refuse("write", p, err)
	}
	if n > math.MaxInt32 {
		return -fuse.EINVAL
	}
	return n
}

// Flush is each close of the handle: on the handle of the create that
// reserved a lease it waits for the lease's commit, and it runs a final
// command written without a newline (leasefs.Commands.Flush); close
// returns the error (through libfuse; WinFsp's close returns nothing,
// closeReportsErrors).
func (f *fileSystem) Flush(p string, fh uint64) int {
	h, ok := f.get(fh)
	if !ok || h.h.Commands == nil {
		return 0
	}
	return f.refuse("close", p, h.h.Commands.Flush())
}

// Fsync syncs an incoming file's backing file; otherwise there is nothing
// to sync: every command is durable when its write (or close) returns.
func (f *fileSystem) Fsync(p string, datasync bool, fh uint64) int {
	if h, ok := f.get(fh); ok && h.h.Incoming != nil {
		return syncIncoming(h.h.Incoming)
	}
	return 0
}

// Release runs what no Flush ran and waits for a created lease's commit
// (its error reaches no one and is only logged), closes the handle's file or events stream, if any, and forgets
// the handle.
func (f *fileSystem) Release(p string, fh uint64) int {
	f.mu.Lock()
	h, ok := f.handles[fh]
	delete(f.handles, fh)
	f.mu.Unlock()
	switch {
	case !ok:
	case h.h.Commands != nil:
		f.refuse("release", p, h.h.Commands.Flush())
	case h.h.Events != nil:
		h.h.Events.Close()
	case h.file() != nil:
		h.file().Close()
		if h.h.Incoming != nil {
			h.h.Incoming.Released()
		}
	}
	return 0
}

// setattr applies one attribute change with leasefs.FS.SetAttr, or
// leasefs.FS.SetIncomingAttr below incoming/ (with size and times).
func (f *fileSystem) setattr(op, p string, fh uint64, ch leasefs.AttrChange) int {
	return f.setattrIncoming(op, p, fh, ch, 0, nil)
}

// Truncate is a no-op on lease and ctl files and truncates incoming
// files; leasefs refuses the rest.
func (f *fileSystem) Truncate(p string, size int64, fh uint64) int {
	return f.setattrIncoming("truncate", p, fh, leasefs.ChangeSize, size, nil)
}

// Chmod is refused by leasefs (EROFS, or EPERM on lease nodes).
func (f *fileSystem) Chmod(p string, mode uint32) int {
	return f.setattr("chmod", p, noHandle, leasefs.ChangeMode)
}

// Chmod3 is Chmod with the open handle's node (FUSE3).
func (f *fileSystem) Chmod3(p string, mode uint32, fh uint64) int {
	return f.setattr("chmod", p, fh, leasefs.ChangeMode)
}

// Chown is refused by leasefs, as Chmod.
func (f *fileSystem) Chown(p string, uid, gid uint32) int {
	return f.setattr("chown", p, noHandle, leasefs.ChangeOwner)
}

// Chown3 is Chown with the open handle's node (FUSE3).
func (f *fileSystem) Chown3(p string, uid, gid uint32, fh uint64) int {
	return f.setattr("chown", p, fh, leasefs.ChangeOwner)
}

// Utimens is a no-op on lease nodes (touch) and refused elsewhere.
func (f *fileSystem) Utimens(p string, tmsp []fuse.Timespec) int {
	return f.setattrIncoming("utimens", p, noHandle, leasefs.ChangeTimes, 0, tmsp)
}

// Utimens3 is Utimens with the open handle's node (FUSE3).
func (f *fileSystem) Utimens3(p string, tmsp []fuse.Timespec, fh uint64) int {
	return f.setattrIncoming("utimens", p, fh, leasefs.ChangeTimes, 0, tmsp)
}

// Access lets the kernel's and WinFsp's checks through, except DELETE_OK
// (Windows: asked before a delete or rename, whose own result WinFsp may
// ignore, fuse-and-store-notes.md §G3), which leasefs.FS.CheckRemove
// answers: only lease files and generation directories may leave their
// directory.
func (f *fileSystem) Access(p string, mask uint32) int {
	if mask&fuse.DELETE_OK == 0 {
		_, err := f.walk(p)
		return errnoOf(err)
	}
	dir, name, err := f.parent(p)
	if err != nil {
		return errnoOf(err)
	}
	return f.refuse("delete", p, f.lfs.CheckRemove(dir, name, f.callerOf()))
}

// Unlink releases a lease (leasefs.FS.Remove); other files are refused.
func (f *fileSystem) Unlink(p string) int {
	dir, name, err := f.parent(p)
	if err != nil {
		return errnoOf(err)
	}
	return f.refuse("unlink", p, f.lfs.Remove(dir, name, f.callerOf()))
}

// Rmdir retires a tombstoned generation (leasefs.FS.Rmdir); every other
// rmdir is refused.
func (f *fileSystem) Rmdir(p string) int {
	dir, name, err := f.parent(p)
	if err != nil {
		return errnoOf(err)
	}
	return f.refuse("rmdir", p, f.lfs.Rmdir(dir, name, f.callerOf()))
}

// makeEntry refuses mkdir, mknod, symlink and link with leasefs.FS.MakeEntry.
func (f *fileSystem) makeEntry(op, p string) int {
	dir, name, err := f.parent(p)
	if err != nil {
		return errnoOf(err)
	}
	return f.refuse(op, p, f.lfs.MakeEntry(dir, name, f.callerOf()))
}

// Mkdir makes an incoming directory under incoming/ (leasefs.FS.Mkdir);
// elsewhere it is refused (EPERM, or EEXIST for an existing name).
func (f *fileSystem) Mkdir(p string, mode uint32) int {
	dir, name, err := f.parent(p)
	if err != nil {
		return errnoOf(err)
	}
	_, err = f.lfs.Mkdir(dir, name, f.callerOf())
	return f.refuse("mkdir", p, err)
}

// Mknod is refused, as Mkdir.
func (f *fileSystem) Mknod(p string, mode uint32, dev uint64) int { return f.makeEntry("mknod", p) }

// Symlink is refused, as Mkdir.
func (f *fileSystem) Symlink(target, newpath string) int { return f.makeEntry("symlink", newpath) }

// Link is refused, as Mkdir.
func (f *fileSystem) Link(oldpath, newpath string) int { return f.makeEntry("link", newpath) }

// Readlink: the tree has no symbolic links.
func (f *fileSystem) Readlink(p string) (int, string) {
	if _, err := f.walk(p); err != nil {
		return errnoOf(err), ""
	}
	return -fuse.EINVAL, ""
}

// Rename is Rename3 without flags (FUSE2 and WinFsp).
func (f *fileSystem) Rename(oldpath, newpath string) int { return f.Rename3(oldpath, newpath, 0) }

// Rename3 tombstones generations/<gen> -> tombstones/<gen> or lifts it
// back (leasefs.FS.Rename); every other rename is refused.
func (f *fileSystem) Rename3(oldpath, newpath string, flags uint32) int {
	oldDir, oldName, err := f.parent(oldpath)
	if err != nil {
		return errnoOf(err)
	}
	newDir, newName, err := f.parent(newpath)
	if err != nil {
		return errnoOf(err)
	}
	var rf leasefs.RenameFlags
	if flags&fuse.RENAME_NOREPLACE != 0 {
		rf |= leasefs.RenameNoReplace
	}
	if flags&fuse.RENAME_EXCHANGE != 0 {
		rf |= leasefs.RenameExchange
	}
	if flags&fuse.RENAME_WHITEOUT != 0 {
		rf |= leasefs.RenameWhiteout
	}
	err = f.lfs.Rename(oldDir, oldName, newDir, newName, rf, f.callerOf())
	return f.refuse("rename", oldpath+" -> "+rel(newpath), err)
}

// Setxattr is refused (EROFS, or EPERM on lease nodes).
func (f *fileSystem) Setxattr(p, name string, value []byte, flags int) int {
	return f.changeXattr("setxattr", p, name)
}

// Removexattr is refused, as Setxattr.
func (f *fileSystem) Removexattr(p, name string) int { return f.changeXattr("removexattr", p, name) }

func (f *fileSystem) changeXattr(op, p, name string) int {
	n, err := f.walk(p)
	if err != nil {
		return errnoOf(err)
	}
	return f.refuse(op, p, f.lfs.ChangeXattr(n, name, f.callerOf()))
}

// Getxattr answers leasefs.ErrNoXattrs (ENOSYS) for every path: the
// tree has no extended attributes, and on that answer the Linux kernel
// stops sending getxattr for the whole mount, so `ls -l` costs no round
// trip per file.
func (f *fileSystem) Getxattr(p, name string) (int, []byte) {
	countCall(f.getxattrs)
	return errnoOf(leasefs.ErrNoXattrs), nil
}

// Listxattr answers leasefs.ErrNoXattrs, as Getxattr.
func (f *fileSystem) Listxattr(p string, fill func(name string) bool) int {
	countCall(f.listxattrs)
	return errnoOf(leasefs.ErrNoXattrs)
}

// countCall adds one to n, if set.
func countCall(n *atomic.Int64) {
	if n != nil {
		n.Add(1)
	}
}
