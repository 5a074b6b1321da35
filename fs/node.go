//go:build linux

package fs

import (
	"context"
	"math"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// CacheTimeout is how long the kernel may cache the entries and attributes
// of nodes that are immutable or change only with a store event
// (leasefs.CacheForever, leasefs.CacheNotified), and names that are absent
// where names are fixed (leasefs.Node.NegativeCacheable). Coherence tells
// the kernel of every change to the latter at once, so the timeout only
// bounds the kernel's memory of unused entries. leasefs.CacheNever nodes
// get zero timeouts: every stat and lookup asks leasefs
// (fuse-and-store-notes.md §A4, §H2).
const CacheTimeout = time.Hour

// node is the go-fuse inode of one leasefs node. It holds no other state:
// every method asks leasefs, so two go-fuse inodes with the same StableAttr
// (go-fuse deduplicates them) always agree.
type node struct {
	fusefs.Inode
	lfs *leasefs.FS
	ln  leasefs.Node
	// noPassthrough is MountOptions.NoPassthrough, inherited by every node.
	noPassthrough bool
	// open is MountOptions.OpenFiles (nil: not counted), inherited by every node.
	open *OpenFiles
	// payloadAttr holds a payload node's attributes from its first open
	// (payloads never change), for its handles' Getattr fallback.
	payloadAttr atomic.Pointer[leasefs.Attr]
	// coherence is MountOptions.Coherence, inherited by every node.
	coherence *Coherence
}

// newChild returns the inode of child, called name below n.
func (n *node) newChild(ctx context.Context, name string, child leasefs.Node) *fusefs.Inode {
	kid := &node{lfs: n.lfs, ln: child, noPassthrough: n.noPassthrough, open: n.open, coherence: n.coherence}
	return n.NewInode(ctx, kid, n.stableAttr(name, child))
}

// incarnations numbers the incarnations of generation directories
// (StableAttr.Gen); 0 is never handed out.
var incarnations atomic.Uint64

// stableAttr is child's go-fuse identity as name below n: its type and
// inode number, and for a directory at or below a generation directory
// an incarnation (StableAttr.Gen), so go-fuse hands out a new node ID for
// the same st_ino each time a generation shows up at another path.
//
// The kernel lets a directory inode have one dentry only. A generation
// moves between generations/, tombstones/ and retiring/; when a ctl write,
// an rmdir or the CLI moves it, the kernel still holds the old dentry
// (Coherence invalidates it, but a process's working directory or an open
// payload below it keeps it alive, unhashed). Were the same node ID
// answered at the new path, the kernel would have to move that alias
// (d_splice_alias, __d_unalias), which fails with ESTALE whenever it
// cannot take the locks at once: `mv tombstones/<gen> generations/` after
// `echo tombstone > generations/<gen>/ctl`, say, holds the rename lock
// itself. A successful rmdir(2) of tombstones/<gen> also marks that inode
// dead (S_DEAD), while the generation stays readable under retiring/.
// So a generation directory keeps its incarnation only where go-fuse
// still links it (the path the kernel saw, rename(2) through the mount
// included: go-fuse moves the link); anywhere else it gets a new one,
// and its payload/ and leases/ directories share it. Files keep Gen 0:
// the kernel lets a file inode have many dentries, and payloads keep one
// page cache.
func (n *node) stableAttr(name string, child leasefs.Node) fusefs.StableAttr {
	a := fusefs.StableAttr{Mode: typeBits(child), Ino: child.Ino()}
	switch {
	case !child.IsDir():
	case child.Kind() == leasefs.KindGenerationDir:
		if old := n.GetChild(name); old != nil && old.Operations().(*node).ln == child {
			a.Gen = old.StableAttr().Gen
		} else {
			a.Gen = incarnations.Add(1)
		}
	case child.Generation() != 0:
		a.Gen = n.StableAttr().Gen
	}
	return a
}

// callerOf returns the credentials and pid (the calling thread's, in the
// daemon's PID namespace) of the request in ctx. A request without them
// (none reaches a node op in go-fuse v2.12) is treated as uid 2^32-1,
// (uid_t)-1, which owns nothing, with pid 0 (unknown).
func callerOf(ctx context.Context) leasefs.Caller {
	if c, ok := fuse.FromContext(ctx); ok {
		return leasefs.Caller{UID: c.Uid, PID: int(c.Pid)}
	}
	return leasefs.Caller{UID: math.MaxUint32}
}

func typeBits(ln leasefs.Node) uint32 {
	if ln.IsDir() {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}

// path is the node's path below the mount root, for log lines.
func (n *node) path(name string) string {
	p := n.Path(nil)
	switch {
	case name == "":
		return p
	case p == "":
		return name
	}
	return p + "/" + name
}

// refuse maps the error of a refused mutation, logging it once.
func (n *node) refuse(op, name string, err error) syscall.Errno {
	return toSyscall(n.lfs.Refuse(op, n.path(name), err))
}

func fillAttr(ln leasefs.Node, a leasefs.Attr, out *fuse.Attr) {
	out.Ino = a.Ino
	out.Size = uint64(a.Size)
	out.Blocks = uint64(a.Blocks)
	out.Blksize = uint32(a.Blksize) // non-zero, so go-fuse keeps Blocks (fs/files_linux.go setBlocks)
	out.Nlink = a.Nlink
	out.Mode = typeBits(ln) | uint32(a.Mode.Perm())
	out.Owner = fuse.Owner{Uid: a.UID, Gid: a.GID}
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
}

func timeout(ln leasefs.Node) time.Duration {
	if ln.CachePolicy() == leasefs.CacheNever {
		return 0
	}
	return CacheTimeout
}

// Lookup resolves a name with leasefs.FS.Lookup; every directory needs it.
var _ = (fusefs.NodeLookuper)((*node)(nil))

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	quiet := n.coherence.quiet()
	child, err := n.lfs.Lookup(n.ln, name)
	if err != nil {
		errno := errnoOf(err)
		if errno == syscall.ENOENT && n.GetChild(name) != nil {
			// Gone by another route (kill, ctl write, retirement): drop
			// go-fuse's link too, so log paths stay true.
			n.RmChild(name)
		}
		if errno == syscall.ENOENT && !n.ln.NegativeCacheable() {
			// go-fuse caches an absent name for Options.NegativeTimeout
			// unless the entry already has a timeout: a non-zero one
			// keeps ENOENT uncached where names come and go.
			out.SetEntryTimeout(time.Nanosecond)
		}
		quiet.close() // only fixed names are cached as absent: no change adds one
		return nil, errno
	}
	a, err := n.lfs.Attr(child)
	if err != nil {
		quiet.close()
		return nil, errnoOf(err)
	}
	return n.entry(ctx, name, child, a, quiet.close(), out), 0
}

// entry fills out for child, called name below n, with attributes a, and
// returns its inode. Unless quiet (no store change was emitted since the
// store was read), the reply may be older than a change's notification,
// which a new kernel inode would miss (Coherence): it gets zero timeouts.
func (n *node) entry(ctx context.Context, name string, child leasefs.Node, a leasefs.Attr, quiet bool, out *fuse.EntryOut) *fusefs.Inode {
	fillAttr(child, a, &out.Attr)
	t := timeout(child)
	if !quiet {
		t = 0
	}
	out.SetEntryTimeout(t)
	out.SetAttrTimeout(t)
	return n.newChild(ctx, name, child)
}

// Getattr reports leasefs.FS.Attr: real sizes, blocks and record times.
// When leasefs cannot answer (the daemon has detached: leasefs.ErrDetached,
// or the generation was retired) and the node has an open handle, it
// answers from that handle's attributes at open (leasefs.FS.OpenAttr:
// the size of its text or snapshot), so fstat(2) of every file still
// served keeps working. The kernel sends fstat's GETATTR without a
// handle; go-fuse then passes the node's first open one.
var _ = (fusefs.NodeGetattrer)((*node)(nil))

func (n *node) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	a, err := n.lfs.Attr(n.ln)
	if err != nil {
		h, ok := fh.(attrHolder)
		if !ok || h.openAttr() == nil {
			return errnoOf(err)
		}
		a = *h.openAttr()
	}
	fillAttr(n.ln, a, &out.Attr)
	out.SetTimeout(timeout(n.ln))
	return 0
}

// OpendirHandle lists through a dirHandle, a page at a time.
var _ = (fusefs.NodeOpendirHandler)((*node)(nil))

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if !n.ln.IsDir() {
		return nil, 0, syscall.ENOTDIR
	}
	return &dirHandle{n: n}, 0, 0
}

func openFlags(flags uint32) leasefs.OpenFlags {
	return leasefs.OpenFlags{
		Write:     flags&syscall.O_ACCMODE != syscall.O_RDONLY,
		Truncate:  flags&syscall.O_TRUNC != 0,
		Append:    flags&syscall.O_APPEND != 0,
		Exclusive: flags&syscall.O_EXCL != 0,
	}
}

// Open serves payloads from the backing file with the page cache kept
// across opens, and rendered files from a snapshot taken at open with
// direct I/O, so cat never shows stale or mixed text.
var _ = (fusefs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	defer n.coherence.begin().end() // a payload open may bind a lease (TEMPLATEFS_LAUNCH_ID)
	of := openFlags(flags)
	h, err := n.lfs.Open(n.ln, of, callerOf(ctx))
	if err != nil {
		return nil, 0, toSyscall(n.lfs.OpenErrno(n.path(""), of, err))
	}
	if h.File != nil && n.payloadAttr.Load() == nil {
		a, err := n.lfs.OpenAttr(n.ln, h)
		if err != nil {
			h.File.Close()
			return nil, 0, errnoOf(err)
		}
		n.payloadAttr.Store(&a)
	}
	return n.handle(n.ln, h)
}

// handle wraps leasefs.Handle h, opened on ln, with its open flags and
// its attributes at open (openedAttr). Payloads get a
// handle without PassthroughFd when passthrough is off, so go-fuse never
// asks the kernel to register the backing file. Only an open for writing
// of a lease or ctl file has something to do at close (a final command
// without a newline, leasefs.Commands.Flush); every other open sets
// FOPEN_NOFLUSH, so its close(2) costs no FLUSH round trip.
func (n *node) handle(ln leasefs.Node, h leasefs.Handle) (fusefs.FileHandle, uint32, syscall.Errno) {
	const cached, direct = fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH
	if h.Incoming != nil {
		return newIncomingFile(h.Incoming, !n.noPassthrough), fuse.FOPEN_NOFLUSH, 0
	}
	if h.File != nil {
		pf := &payloadFile{lf: fusefs.NewLoopbackFileFromOS(h.File), atOpen: atOpen{n.payloadAttr.Load()}, open: opened(n.open.counter(true))}
		if n.noPassthrough {
			return pf, cached, 0
		}
		return &passthroughFile{pf}, cached, 0
	}
	at := n.openedAttr(ln, h)
	if h.Snapshot != nil {
		// Read from the fd like a payload, but never cached or passed
		// through: each open has its own snapshot.
		return &payloadFile{lf: fusefs.NewLoopbackFileFromOS(h.Snapshot), atOpen: at, open: opened(n.open.counter(false))}, direct, 0
	}
	if h.Events != nil {
		return &eventsFile{ev: h.Events, atOpen: at, open: opened(n.open.counter(false))}, eventsOpenFlags, 0
	}
	text := textFile{data: h.Data, atOpen: at, open: opened(n.open.counter(false))}
	if h.Commands != nil {
		return &commandFile{textFile: text, n: n, cmd: h.Commands}, fuse.FOPEN_DIRECT_IO, 0
	}
	return &text, direct, 0
}

// Create reserves a lease (generations/<gen>/leases/<clone-id> or
// keys/<key-id>/leases/<clone-id>), creates an incoming file, or opens
// an existing name, with leasefs.FS.Create; elsewhere leasefs refuses. A
// new lease is acknowledged at close: its handle's Flush waits for the
// lease's commit (leasefs.Commands.Flush), and the kernel sends FLUSH at
// every close(2), also of a creator that is killed.
var _ = (fusefs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	defer n.coherence.begin(n.EmbeddedInode()).end()
	cr, err := n.lfs.Create(n.ln, name, openFlags(flags), callerOf(ctx))
	if err != nil {
		return nil, nil, 0, n.refuse("create", name, err)
	}
	// Answer from the create's own attributes, not a second store read: the
	// lease may already be released by another caller, and this create
	// still succeeded; a reserved lease's read would wait for its commit.
	// Writes go through the node, so a text handle serves both readers and
	// writers of a lease file. A lease node's timeouts are zero, so no
	// kernel cache holds the entry of a lease whose commit then fails.
	fillAttr(cr.Node, cr.Attr, &out.Attr)
	out.SetEntryTimeout(timeout(cr.Node))
	out.SetAttrTimeout(timeout(cr.Node))
	fh, fl, _ := n.handle(cr.Node, cr.Handle)
	return n.newChild(ctx, name, cr.Node), fh, fl, 0
}

// Unlink releases a lease (leasefs.FS.Remove); other files are refused.
var _ = (fusefs.NodeUnlinker)((*node)(nil))

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	defer n.coherence.begin(n.EmbeddedInode()).end(n.GetChild(name))
	if err := n.lfs.Remove(n.ln, name, callerOf(ctx)); err != nil {
		return n.refuse("unlink", name, err)
	}
	return 0
}

// Rmdir retires a tombstoned generation (leasefs.FS.Rmdir); every other
// rmdir is refused. Without it go-fuse would report success. On success
// the kernel drops its dentry itself and go-fuse its link; the generation
// reappears under retiring/ as a new kernel inode (stableAttr).
var _ = (fusefs.NodeRmdirer)((*node)(nil))

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	defer n.coherence.begin(n.EmbeddedInode()).end()
	return n.refuse("rmdir", name, n.lfs.Rmdir(n.ln, name, callerOf(ctx)))
}

// Mkdir makes an incoming directory under incoming/ (leasefs.FS.Mkdir);
// Mknod, Symlink and Link, and Mkdir elsewhere, are refused by
// leasefs.FS.MakeEntry (EPERM), rather than go-fuse's default ENOTSUP.
var (
	_ = (fusefs.NodeMkdirer)((*node)(nil))
	_ = (fusefs.NodeMknoder)((*node)(nil))
	_ = (fusefs.NodeSymlinker)((*node)(nil))
	_ = (fusefs.NodeLinker)((*node)(nil))
)

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	defer n.coherence.begin(n.EmbeddedInode()).end()
	child, err := n.lfs.Mkdir(n.ln, name, callerOf(ctx))
	if err != nil {
		return nil, n.refuse("mkdir", name, err)
	}
	a, err := n.lfs.Attr(child)
	if err != nil {
		return nil, errnoOf(err)
	}
	return n.entry(ctx, name, child, a, true, out), 0 // a new name in the request's own directory
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, n.refuse("mknod", name, n.lfs.MakeEntry(n.ln, name, callerOf(ctx)))
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, n.refuse("symlink", name, n.lfs.MakeEntry(n.ln, name, callerOf(ctx)))
}

func (n *node) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, n.refuse("link", name, n.lfs.MakeEntry(n.ln, name, callerOf(ctx)))
}

// Rename tombstones generations/<gen> -> tombstones/<gen> with the
// caller's uid, or lifts tombstones/<gen> -> generations/<gen>
// (leasefs.FS.Rename); go-fuse then moves its dentry, and the kernel its
// own, so a listing right after shows the move.
var _ = (fusefs.NodeRenamer)((*node)(nil))

func (n *node) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EPERM // not a templatefs node; the kernel never sends one
	}
	defer n.coherence.begin(n.EmbeddedInode(), np.EmbeddedInode()).end()
	var rf leasefs.RenameFlags
	if flags&unix.RENAME_NOREPLACE != 0 {
		rf |= leasefs.RenameNoReplace
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		rf |= leasefs.RenameExchange
	}
	if flags&unix.RENAME_WHITEOUT != 0 {
		rf |= leasefs.RenameWhiteout
	}
	if err := n.lfs.Rename(n.ln, name, np.ln, newName, rf, callerOf(ctx)); err != nil {
		return toSyscall(n.lfs.Refuse("rename", n.path(name)+" -> "+np.path(newName), err))
	}
	return 0
}

// Setattr: times on lease nodes, and the size of lease and ctl files, are
// a no-op (touch, and the truncate of `echo ... > file`, must succeed);
// anything else leasefs.FS.SetAttr refuses.
var _ = (fusefs.NodeSetattrer)((*node)(nil))

func (n *node) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var c leasefs.AttrChange
	if in.Valid&fuse.FATTR_MODE != 0 {
		c |= leasefs.ChangeMode
	}
	if in.Valid&(fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		c |= leasefs.ChangeOwner
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		c |= leasefs.ChangeSize
	}
	if in.Valid&(fuse.FATTR_ATIME|fuse.FATTR_MTIME|fuse.FATTR_ATIME_NOW|fuse.FATTR_MTIME_NOW|fuse.FATTR_CTIME) != 0 {
		c |= leasefs.ChangeTimes
	}
	if n.ln.IsIncoming() {
		if errno := n.setattrIncoming(ctx, c, in); errno != 0 {
			return errno
		}
		return n.Getattr(ctx, fh, out)
	}
	if err := n.lfs.SetAttr(n.ln, c, callerOf(ctx)); err != nil {
		return n.refuse("setattr", "", err)
	}
	return n.Getattr(ctx, fh, out)
}

// Setxattr and Removexattr are refused (EROFS, or EPERM on lease nodes);
// without them go-fuse answers ENOATTR.
var (
	_ = (fusefs.NodeSetxattrer)((*node)(nil))
	_ = (fusefs.NodeRemovexattrer)((*node)(nil))
)

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.refuse("setxattr", "", n.lfs.ChangeXattr(n.ln, attr, callerOf(ctx)))
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.refuse("removexattr", "", n.lfs.ChangeXattr(n.ln, attr, callerOf(ctx)))
}

// Write writes an incoming file's backing file (where passthrough does
// not already), and passes every other write(2) to the handle's
// leasefs.Commands: lines of `pid N` or `kill` on lease files,
// `tombstone`, `lift` or `retire` on ctl files, `publish` on incoming ctl
// files. Only those opens have one; every other node refuses opens for
// writing, so the kernel sends no write for them. Node-level, so no
// handle type can bypass it.
var _ = (fusefs.NodeWriter)((*node)(nil))

func (n *node) Write(ctx context.Context, fh fusefs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if f := incomingHandle(fh); f != nil {
		return f.Write(ctx, data, off)
	}
	cf, ok := fh.(*commandFile)
	if !ok {
		return 0, syscall.EBADF // not opened for writing; the kernel refuses such writes itself
	}
	defer n.coherence.begin().end(n.EmbeddedInode()) // the kernel holds only this file's lock
	written, err := cf.cmd.Write(data, callerOf(ctx))
	if errno := n.refuse("write", "", err); errno != 0 {
		return 0, errno
	}
	return uint32(written), 0
}

// Allocate answers fallocate(2) with leasefs.FS.Allocate: forwarded to
// the backing file of an incoming file, else EOPNOTSUPP, logged; the
// kernel sends it only for descriptors open for writing.
var _ = (fusefs.NodeAllocater)((*node)(nil))

func (n *node) Allocate(ctx context.Context, fh fusefs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if errno := n.refuse("fallocate", "", n.lfs.Allocate(n.ln, callerOf(ctx))); errno != 0 {
		return errno
	}
	if f := incomingHandle(fh); f != nil {
		return f.Allocate(ctx, off, size, mode)
	}
	return syscall.EOPNOTSUPP // leasefs allows it only for incoming files
}

// Fsync fsyncs an incoming file's backing file. Otherwise it has nothing
// to sync: payloads never change, and every command is durable when its
// write (or close) returns. Without it go-fuse answers EOPNOTSUPP, which
// fsync(2) would return.
var _ = (fusefs.NodeFsyncer)((*node)(nil))

func (n *node) Fsync(ctx context.Context, fh fusefs.FileHandle, flags uint32) syscall.Errno {
	if f := incomingHandle(fh); f != nil {
		return f.Fsync(ctx, flags)
	}
	return 0
}

// Getxattr and Listxattr answer leasefs.ErrNoXattrs (ENOSYS) for every
// node: the tree has no extended attributes, and on that answer the Linux
// kernel stops sending either for the whole mount (fc->no_getxattr,
// no_listxattr), so `ls -l` costs no xattr round trip per file. Without
// them go-fuse answers ENOATTR, after which the kernel keeps asking.
var (
	_ = (fusefs.NodeGetxattrer)((*node)(nil))
	_ = (fusefs.NodeListxattrer)((*node)(nil))
)

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, errnoOf(leasefs.ErrNoXattrs)
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, errnoOf(leasefs.ErrNoXattrs)
}
