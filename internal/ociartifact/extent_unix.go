//go:build unix

package ociartifact

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// nextExtent returns the data extent [data, hole) of f at or after off,
// clipped to size; data == size when there is none. A file system without
// SEEK_DATA (EINVAL) reads as data from off to size.
func nextExtent(f *os.File, off, size int64) (data, hole int64) {
	data, err := f.Seek(off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO) || err == nil && data >= size:
		return size, size
	case err != nil:
		return off, size
	}
	hole, err = f.Seek(data, unix.SEEK_HOLE)
	if err != nil || hole > size {
		hole = size
	}
	return data, hole
}
