//go:build unix

package leasefs

import (
	"fmt"
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

// openNoFollow is the open flag that refuses a symbolic link as the last
// component.
const openNoFollow = syscall.O_NOFOLLOW

// backingIno is the inode number of fi (at path), within the 56 bits an
// object number has.
func backingIno(path string, fi fs.FileInfo) (uint64, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino == 0 || st.Ino > MaxObjectNumber {
		return 0, fmt.Errorf("%s: no inode number below 2^56: %w", path, ErrInoOverflow)
	}
	return st.Ino, nil
}
