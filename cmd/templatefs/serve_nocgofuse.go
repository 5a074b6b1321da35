//go:build linux && !(cgo && fuse3)

package main

import (
	"errors"

	"templatefs/leasefs"
)

// serveCgofuse refuses: this binary was built without the cgofuse backend.
func serveCgofuse(*leasefs.FS, string, mountConfig, func()) error {
	return errors.New("this templatefs was built without the cgofuse backend: rebuild with cgo and -tags fuse3 (needs libfuse3-dev)")
}
