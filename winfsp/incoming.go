//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"math"
	"time"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// writeIncoming writes buff at ofst to an incoming file's backing file (at
// its end for an O_APPEND open, whose descriptor ignores offsets).
func writeIncoming(h *leasefs.IncomingFile, buff []byte, ofst int64) int {
	if len(buff) > math.MaxInt32 {
		return -fuse.EINVAL
	}
	var n int
	var err error
	if h.Append {
		n, err = h.File.Write(buff)
	} else {
		n, err = h.File.WriteAt(buff, ofst)
	}
	if err != nil {
		return errnoOf(err)
	}
	return n
}

// syncIncoming fsyncs an incoming file's backing file.
func syncIncoming(h *leasefs.IncomingFile) int {
	if err := h.File.Sync(); err != nil {
		return errnoOf(err)
	}
	return 0
}

// setattrIncoming applies a setattr: leasefs.FS.SetIncomingAttr (with
// size and the times of tmsp, [atime, mtime]) for incoming nodes,
// leasefs.FS.SetAttr for every other node.
func (f *fileSystem) setattrIncoming(op, p string, fh uint64, ch leasefs.AttrChange, size int64, tmsp []fuse.Timespec) int {
	n, err := f.node(p, fh)
	if err != nil {
		return errnoOf(err)
	}
	if !n.IsIncoming() {
		return f.refuse(op, p, f.lfs.SetAttr(n, ch, f.callerOf()))
	}
	var atime, mtime time.Time
	if len(tmsp) == 2 {
		atime, mtime = tmsp[0].Time(), tmsp[1].Time()
	}
	return f.refuse(op, p, f.lfs.SetIncomingAttr(n, ch, size, atime, mtime, f.callerOf()))
}
