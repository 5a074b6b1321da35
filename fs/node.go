//go:build linux

package fs

import (
	"context"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// ImmutableTimeout is how long the kernel may cache entries and attributes
// of immutable nodes (leasefs.Node.Immutable: payloads, manifest and key
// texts). Everything else changes at any commit and gets zero timeouts, so
// every stat and lookup asks leasefs (fuse-and-store-notes.md §A4, §H2).
const ImmutableTimeout = time.Hour

// node is the go-fuse inode of one leasefs node. It holds no other state:
// every method asks leasefs, so two go-fuse inodes with the same StableAttr
// (go-fuse deduplicates them) always agree.
type node struct {
	fusefs.Inode
	lfs *leasefs.FS
	ln  leasefs.Node
}

func (n *node) newChild(ctx context.Context, child leasefs.Node) *fusefs.Inode {
	return n.NewInode(ctx, &node{lfs: n.lfs, ln: child}, fusefs.StableAttr{Mode: typeBits(child), Ino: child.Ino()})
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
	if ln.Immutable() {
		return ImmutableTimeout
	}
	return 0
}

// entryOut fills out for child: attributes and both timeouts.
func (n *node) entryOut(child leasefs.Node, out *fuse.EntryOut) syscall.Errno {
	a, err := n.lfs.Attr(child)
	if err != nil {
		return errnoOf(err)
	}
	fillAttr(child, a, &out.Attr)
	out.SetEntryTimeout(timeout(child))
	out.SetAttrTimeout(timeout(child))
	return 0
}

// Lookup resolves a name with leasefs.FS.Lookup; every directory needs it.
var _ = (fusefs.NodeLookuper)((*node)(nil))

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	child, err := n.lfs.Lookup(n.ln, name)
	if err != nil {
		return nil, errnoOf(err)
	}
	if errno := n.entryOut(child, out); errno != 0 {
		return nil, errno
	}
	return n.newChild(ctx, child), 0
}

// Getattr reports leasefs.FS.Attr: real sizes, blocks and record times.
var _ = (fusefs.NodeGetattrer)((*node)(nil))

func (n *node) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	a, err := n.lfs.Attr(n.ln)
	if err != nil {
		return errnoOf(err)
	}
	fillAttr(n.ln, a, &out.Attr)
	out.SetTimeout(timeout(n.ln))
	return 0
}

// Readdir lists with leasefs.FS.ReadDir, filling d_ino with the same
// inode numbers stat reports (fuse-and-store-notes.md §D6.2).
var _ = (fusefs.NodeReaddirer)((*node)(nil))

func (n *node) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	entries, err := n.lfs.ReadDir(n.ln)
	if err != nil {
		return nil, errnoOf(err)
	}
	list := make([]fuse.DirEntry, len(entries))
	for i, e := range entries {
		list[i] = fuse.DirEntry{Name: e.Name, Mode: typeBits(e.Node), Ino: e.Node.Ino()}
	}
	return fusefs.NewListDirStream(list), 0
}

func openFlags(flags uint32) leasefs.OpenFlags {
	return leasefs.OpenFlags{
		Write:    flags&syscall.O_ACCMODE != syscall.O_RDONLY,
		Truncate: flags&syscall.O_TRUNC != 0,
	}
}

// Open serves payloads from the backing file with the page cache kept
// across opens, and rendered files from a snapshot taken at open with
// direct I/O, so cat never shows stale or mixed text.
var _ = (fusefs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	of := openFlags(flags)
	h, err := n.lfs.Open(n.ln, of)
	switch {
	case err != nil && (of.Write || of.Truncate):
		return nil, 0, n.refuse("open", "", err)
	case err != nil:
		return nil, 0, errnoOf(err)
	}
	return handle(h)
}

// handle wraps an opened leasefs.Handle with its open flags.
func handle(h leasefs.Handle) (fusefs.FileHandle, uint32, syscall.Errno) {
	if h.File != nil {
		return &payloadFile{lf: fusefs.NewLoopbackFileFromOS(h.File)}, fuse.FOPEN_KEEP_CACHE, 0
	}
	return &textFile{data: h.Data}, fuse.FOPEN_DIRECT_IO, 0
}

// Create acquires a lease (generations/<gen>/leases/<clone-id>) with
// leasefs.FS.Create and opens it; elsewhere leasefs refuses.
var _ = (fusefs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	child, err := n.lfs.Create(n.ln, name, flags&syscall.O_EXCL != 0)
	if err != nil {
		return nil, nil, 0, n.refuse("create", name, err)
	}
	// The kernel sends CREATE only for a name its lookup did not find, so
	// the file is new to the caller and O_TRUNC has nothing to cut.
	of := openFlags(flags)
	of.Truncate = false
	h, err := n.lfs.Open(child, of)
	if err != nil {
		return nil, nil, 0, n.refuse("open", name, err)
	}
	if errno := n.entryOut(child, out); errno != 0 {
		if h.File != nil {
			h.File.Close()
		}
		return nil, nil, 0, errno
	}
	fh, fl, _ := handle(h)
	return n.newChild(ctx, child), fh, fl, 0
}

// Unlink releases a lease (leasefs.FS.Remove); other files are refused.
var _ = (fusefs.NodeUnlinker)((*node)(nil))

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if err := n.lfs.Remove(n.ln, name); err != nil {
		return n.refuse("unlink", name, err)
	}
	return 0
}

// Rmdir is refused by leasefs; without it go-fuse would report success.
var _ = (fusefs.NodeRmdirer)((*node)(nil))

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.refuse("rmdir", name, n.lfs.Rmdir(n.ln, name))
}

// Mkdir, Mknod, Symlink and Link are refused by leasefs.FS.MakeEntry
// (EPERM), rather than go-fuse's default ENOTSUP.
var (
	_ = (fusefs.NodeMkdirer)((*node)(nil))
	_ = (fusefs.NodeMknoder)((*node)(nil))
	_ = (fusefs.NodeSymlinker)((*node)(nil))
	_ = (fusefs.NodeLinker)((*node)(nil))
)

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, n.refuse("mkdir", name, n.lfs.MakeEntry(n.ln, name))
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, n.refuse("mknod", name, n.lfs.MakeEntry(n.ln, name))
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, n.refuse("symlink", name, n.lfs.MakeEntry(n.ln, name))
}

func (n *node) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, n.refuse("link", name, n.lfs.MakeEntry(n.ln, name))
}

// Rename tombstones generations/<gen> -> tombstones/<gen> with the
// caller's uid (leasefs.FS.Rename); go-fuse then moves its dentry, and the
// kernel its own, so a listing right after shows the move.
var _ = (fusefs.NodeRenamer)((*node)(nil))

func (n *node) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EPERM // not a templatefs node; the kernel never sends one
	}
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
	var uid uint32
	if c, ok := fuse.FromContext(ctx); ok {
		uid = c.Uid
	}
	if err := n.lfs.Rename(n.ln, name, np.ln, newName, rf, uid); err != nil {
		return toSyscall(n.lfs.Refuse("rename", n.path(name)+" -> "+np.path(newName), err))
	}
	return 0
}

// Setattr: times on lease nodes are a no-op (touch must succeed);
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
	if err := n.lfs.SetAttr(n.ln, c); err != nil {
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
	return n.refuse("setxattr", "", n.lfs.ChangeXattr(n.ln, attr))
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.refuse("removexattr", "", n.lfs.ChangeXattr(n.ln, attr))
}

// Write answers every write with leasefs.FS.Write (EINVAL on lease files,
// EROFS elsewhere), whatever the handle, so no handle can write.
var _ = (fusefs.NodeWriter)((*node)(nil))

func (n *node) Write(ctx context.Context, fh fusefs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, n.refuse("write", "", n.lfs.Write(n.ln))
}
