//go:build !unix

package leasefs

import (
	"hash/fnv"
	"io/fs"
)

// allocated returns the size rounded up to 512-byte units and textBlksize:
// this platform's stat has no allocation count.
func allocated(fi fs.FileInfo) (blocks int64, blksize int32) {
	return (fi.Size() + 511) / 512, textBlksize
}

// openNoFollow is 0: this platform's open has no O_NOFOLLOW (the store
// refuses reparse points at Open).
const openNoFollow = 0

// backingIno stands in for the inode number this platform's stat lacks:
// a 56-bit FNV-1a hash of path, stable while the file keeps its name.
func backingIno(path string, _ fs.FileInfo) (uint64, error) {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64()&MaxObjectNumber | 1, nil
}
