//go:build unix

package leasefs

import (
	"io/fs"
	"syscall"
)

// allocated returns the backing file's st_blocks (512-byte units) and
// st_blksize, so a sparse payload reports the space it really uses.
func allocated(fi fs.FileInfo) (blocks int64, blksize int32) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks), int32(st.Blksize)
	}
	return (fi.Size() + 511) / 512, textBlksize
}
