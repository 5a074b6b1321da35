//go:build linux

package fs

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"templatefs/leasefs"
)

// eventsOpenFlags serve the events file as a stream: direct I/O (the
// file has size 0 and no page cache could hold a stream), no offsets
// (FOPEN_STREAM, FOPEN_NONSEEKABLE: lseek and pread fail with ESPIPE) and
// no FLUSH at close.
const eventsOpenFlags = fuse.FOPEN_DIRECT_IO | fuse.FOPEN_STREAM | fuse.FOPEN_NONSEEKABLE | fuse.FOPEN_NOFLUSH

// eventsFile is an open of the events file: its own leasefs.Events.
type eventsFile struct {
	ev *leasefs.Events
	atOpen
	open *atomic.Int64 // the mount's count of open non-payload handles, or nil
}

// Read blocks until events come (leasefs.Events.Read) and ignores the
// offset. It ends with EINTR when the kernel interrupts the request (the
// reader got a signal: go-fuse closes the request context's Done on FUSE
// INTERRUPT, and for every request when the connection goes away), and
// with EOF once the events ended (unmount: leasefs.FS.EndEvents, or the
// store closed).
var _ = (fusefs.FileReader)((*eventsFile)(nil))

func (e *eventsFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := e.ev.Read(ctx, dest)
	switch {
	case n > 0 || errors.Is(err, io.EOF):
		return fuse.ReadResultData(dest[:n]), 0
	case err != nil:
		return nil, errnoOf(err)
	}
	return fuse.ReadResultData(nil), 0
}

// Release ends the subscription.
var _ = (fusefs.FileReleaser)((*eventsFile)(nil))

func (e *eventsFile) Release(ctx context.Context) syscall.Errno {
	e.ev.Close()
	closed(e.open)
	return 0
}
