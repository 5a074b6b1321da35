//go:build linux

package fs

import (
	"context"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"templatefs/leasefs"
)

// payloadFile serves a payload from its backing file, opened O_RDONLY by
// store.OpenPayload. It forwards only the reading operations of
// LoopbackFile: no Write, Setattr, Allocate or Ioctl reaches the backing
// file (node.Write and node.Setattr answer those), and since the fd is
// read-only the kernel refuses a writable shared mapping itself.
type payloadFile struct {
	lf *fusefs.LoopbackFile
	atOpen
	open *atomic.Int64 // the mount's count of such open handles (OpenFiles), or nil
}

// atOpen holds a handle's attributes at open (leasefs.FS.OpenAttr), or
// nil when they could not be taken: node.Getattr answers from them when
// leasefs cannot (the daemon has detached).
type atOpen struct{ attr *leasefs.Attr }

func (a atOpen) openAttr() *leasefs.Attr { return a.attr }

// attrHolder is a handle with attributes at open.
type attrHolder interface{ openAttr() *leasefs.Attr }

var (
	_ attrHolder = (*payloadFile)(nil)
	_ attrHolder = (*passthroughFile)(nil)
	_ attrHolder = (*textFile)(nil)
	_ attrHolder = (*commandFile)(nil)
	_ attrHolder = (*eventsFile)(nil)
)

// openedAttr takes the attributes of h, just opened on ln, for its
// handle; when leasefs cannot give them (the node went meanwhile), the
// handle has none, and fstat answers as leasefs does.
func (n *node) openedAttr(ln leasefs.Node, h leasefs.Handle) atOpen {
	a, err := n.lfs.OpenAttr(ln, h)
	if err != nil {
		return atOpen{}
	}
	return atOpen{&a}
}

// opened adds one open handle to count (nil: not counted) and returns it,
// for the handle's Release to take off again (closed).
func opened(count *atomic.Int64) *atomic.Int64 {
	if count != nil {
		count.Add(1)
	}
	return count
}

// closed takes the handle counted by opened off count.
func closed(count *atomic.Int64) {
	if count != nil {
		count.Add(-1)
	}
}

// Read returns the backing fd and range (fuse.ReadResultFd: splice, no copy).
var _ = (fusefs.FileReader)((*payloadFile)(nil))

func (p *payloadFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return p.lf.Read(ctx, dest, off)
}

// Lseek forwards SEEK_DATA/SEEK_HOLE so tools skip holes
// (fuse-and-store-notes.md §D5).
var _ = (fusefs.FileLseeker)((*payloadFile)(nil))

func (p *payloadFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return p.lf.Lseek(ctx, off, whence)
}

// passthroughFile is a payloadFile whose backing file the kernel may read
// directly when it supports passthrough (Linux >= 6.9, CAP_SYS_ADMIN: §A1);
// where the kernel refuses it, go-fuse falls back to payloadFile.Read.
type passthroughFile struct {
	*payloadFile
}

// PassthroughFd hands go-fuse the backing fd to register with the kernel.
var _ = (fusefs.FilePassthroughFder)((*passthroughFile)(nil))

func (p *passthroughFile) PassthroughFd() (int, bool) { return p.lf.PassthroughFd() }

// Release closes the backing file.
var _ = (fusefs.FileReleaser)((*payloadFile)(nil))

func (p *payloadFile) Release(ctx context.Context) syscall.Errno {
	closed(p.open)
	return p.lf.Release(ctx)
}

// textFile serves the text rendered at open.
type textFile struct {
	data []byte
	atOpen
	open *atomic.Int64 // the mount's count of open non-payload handles, or nil
}

// Release forgets the handle.
var _ = (fusefs.FileReleaser)((*textFile)(nil))

func (t *textFile) Release(ctx context.Context) syscall.Errno {
	closed(t.open)
	return 0
}

// Read serves from the snapshot; the file is opened with direct I/O.
var _ = (fusefs.FileReader)((*textFile)(nil))

func (t *textFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(t.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(int64(len(t.data)), off+int64(len(dest)))
	return fuse.ReadResultData(t.data[off:end]), 0
}

// commandFile is an open of a lease or ctl file for writing: reads serve
// the text rendered at open, writes go to its leasefs.Commands (through
// node.Write), and close runs a final line written without a newline.
type commandFile struct {
	textFile
	n   *node
	cmd *leasefs.Commands
}

// Flush is FLUSH, sent at each close(2) of the handle (also when the
// kernel closes the descriptors of a killed process): close returns the
// error of a lease's commit, on the handle of the create that reserved
// it (leasefs.Commands.Flush waits for that commit), or of a final
// command written without a newline.
var _ = (fusefs.FileFlusher)((*commandFile)(nil))

func (c *commandFile) Flush(ctx context.Context) syscall.Errno {
	defer c.n.coherence.begin().end(c.n.EmbeddedInode())
	return c.n.refuse("close", "", c.cmd.Flush())
}

// Release runs what no FLUSH ran (none is pending after a close); no one
// receives its error, so it is only logged. It waits for no
// notifications (RELEASE can arrive while the mount is going away, and no
// caller waits for it): Coherence's watcher tells the kernel of its
// changes.
var _ = (fusefs.FileReleaser)((*commandFile)(nil))

func (c *commandFile) Release(ctx context.Context) syscall.Errno {
	c.n.refuse("release", "", c.cmd.Flush())
	return c.textFile.Release(ctx)
}
