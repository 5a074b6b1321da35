//go:build linux

package fs

import (
	"context"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"templatefs/leasefs"
)

// incomingFile is an open file of an incoming directory
// (leasefs.Handle.Incoming): every read, write, seek, fsync and fallocate
// goes to the backing file through go-fuse's LoopbackFile, so holes that
// cp --sparse=always leaves stay holes and SEEK_DATA/SEEK_HOLE work.
// leasefs decided who may open it and how; this only forwards.
type incomingFile struct {
	lf  *fusefs.LoopbackFile
	inc *leasefs.IncomingFile
}

// passthroughIncoming is an incomingFile whose backing file the kernel
// reads and writes directly where it supports passthrough (as
// passthroughFile for payloads); elsewhere go-fuse serves it through
// incomingFile's methods.
type passthroughIncoming struct {
	*incomingFile
}

var (
	_ = (fusefs.FileReader)((*incomingFile)(nil))
	_ = (fusefs.FileWriter)((*incomingFile)(nil))
	_ = (fusefs.FileLseeker)((*incomingFile)(nil))
	_ = (fusefs.FileFsyncer)((*incomingFile)(nil))
	_ = (fusefs.FileAllocater)((*incomingFile)(nil))
	_ = (fusefs.FileFlusher)((*incomingFile)(nil))
	_ = (fusefs.FileReleaser)((*incomingFile)(nil))
	_ = (fusefs.FilePassthroughFder)((*passthroughIncoming)(nil))
)

func newIncomingFile(h *leasefs.IncomingFile, passthrough bool) fusefs.FileHandle {
	f := &incomingFile{lf: fusefs.NewLoopbackFileFromOS(h.File), inc: h}
	if passthrough {
		return &passthroughIncoming{f}
	}
	return f
}

func (p *passthroughIncoming) PassthroughFd() (int, bool) { return p.lf.PassthroughFd() }

func (f *incomingFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, dest, off)
}

func (f *incomingFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return f.lf.Write(ctx, data, off)
}

func (f *incomingFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

func (f *incomingFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return f.lf.Fsync(ctx, flags)
}

func (f *incomingFile) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.lf.Allocate(ctx, off, size, mode)
}

func (f *incomingFile) Flush(ctx context.Context) syscall.Errno { return 0 }

// Release closes the backing file, then ends the handle's count as a
// writer, so a publication started after the last close(2) sees none.
func (f *incomingFile) Release(ctx context.Context) syscall.Errno {
	errno := f.lf.Release(ctx)
	f.inc.Released()
	return errno
}

// incomingHandle unwraps fh if it is an open incoming file.
func incomingHandle(fh fusefs.FileHandle) *incomingFile {
	switch f := fh.(type) {
	case *incomingFile:
		return f
	case *passthroughIncoming:
		return f.incomingFile
	}
	return nil
}

// setattrIncoming decodes a setattr of an incoming node for
// leasefs.FS.SetIncomingAttr.
func (n *node) setattrIncoming(ctx context.Context, c leasefs.AttrChange, in *fuse.SetAttrIn) syscall.Errno {
	var atime, mtime time.Time
	now := time.Now()
	if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
		atime = now
	} else if t, ok := in.GetATime(); ok {
		atime = t
	}
	if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
		mtime = now
	} else if t, ok := in.GetMTime(); ok {
		mtime = t
	}
	size, _ := in.GetSize()
	return n.refuse("setattr", "", n.lfs.SetIncomingAttr(n.ln, c, int64(size), atime, mtime, callerOf(ctx)))
}
