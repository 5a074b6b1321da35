//go:build !unix

package leasefs

import "io/fs"

// allocated returns the size rounded up to 512-byte units and textBlksize:
// this platform's stat has no allocation count.
func allocated(fi fs.FileInfo) (blocks int64, blksize int32) {
	return (fi.Size() + 511) / 512, textBlksize
}
