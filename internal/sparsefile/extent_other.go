//go:build !unix

package sparsefile

import "os"

// NextExtent treats the whole rest of the file as data: this system has no
// SEEK_DATA (on Windows, captures and copies are dense,
// openvmm-snapshot-format.md §1). Callers still leave out all-zero
// blocks, which read back as zeros.
func NextExtent(_ *os.File, off, size int64) (data, hole int64) { return off, size }
