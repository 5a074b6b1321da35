//go:build unix

// Package sparsefile finds the data extents of a file, for the copies and
// encodings that leave its holes out.
package sparsefile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// NextExtent returns the next data extent [data, hole) of f at or after
// off, clipped to size. With no data left it returns (size, size). A file
// system without SEEK_DATA support is treated as all data.
func NextExtent(f *os.File, off, size int64) (data, hole int64) {
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
