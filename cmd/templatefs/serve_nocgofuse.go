//go:build linux && !(cgo && fuse3)

package main

import (
	"errors"

	"templatefs/leasefs"
)

// mountCgofuse refuses: this binary was built without the cgofuse backend.
func mountCgofuse(*leasefs.FS, string, mountConfig) (mounted, error) {
	return nil, errors.New("this templatefs was built without the cgofuse backend: rebuild with cgo and -tags fuse3 (needs libfuse3-dev)")
}
