//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"context"
	"errors"
	"io"
	"math"
	"time"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// OpenEx is Open, which cgofuse calls instead when it is there, so an
// open of the events file can ask for direct I/O: the file has size 0
// and the kernel reads a stream only without the page cache. It is not
// seekable either: the stream has no offsets. The metrics file is read
// with direct I/O too: its rendering at open is longer than the size a
// stat saw just before whenever a counter gained a digit, and the page
// cache would cut the read at that size.
func (f *fileSystem) OpenEx(p string, fi *fuse.FileInfo_t) int {
	errc, fh := f.Open(p, fi.Flags)
	fi.Fh = fh
	if h, ok := f.get(fh); ok && h.h.Events != nil {
		fi.DirectIo, fi.NonSeekable = true, true
	} else if ok && h.node.Kind() == leasefs.KindMetricsFile {
		fi.DirectIo = true
	}
	return errc
}

// CreateEx is Create; cgofuse calls it instead when OpenEx is there.
func (f *fileSystem) CreateEx(p string, mode uint32, fi *fuse.FileInfo_t) int {
	errc, fh := f.Create(p, fi.Flags, mode)
	fi.Fh = fh
	return errc
}

// interruptPoll is how often a read of the events file that waits asks
// libfuse whether the kernel interrupted it (the reader got a signal).
const interruptPoll = 100 * time.Millisecond

// readEvents serves a read of the events file (leasefs.Events.Read). It
// blocks, in this callback, until events come; meanwhile it polls
// interrupted on the callback's own thread, where libfuse keeps the
// request, and on an interrupt ends the read with EINTR. Once the events
// ended (leasefs.FS.EndEvents at unmount, or the store closed) it returns
// 0: end of file. The offset is ignored.
func readEvents(ev *leasefs.Events, buff []byte) int {
	type result struct {
		n   int
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		n, err := ev.Read(ctx, buff)
		done <- result{n, err}
	}()
	tick := time.NewTicker(interruptPoll)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			switch {
			case r.n > math.MaxInt32:
				return -fuse.EIO // a FUSE read is at most a few MiB
			case r.n > 0 || errors.Is(r.err, io.EOF):
				return r.n
			case r.err != nil:
				return errnoOf(r.err)
			}
			return 0
		case <-tick.C:
			if interrupted() {
				cancel()
			}
		}
	}
}
