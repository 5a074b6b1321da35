//go:build windows || (linux && cgo && fuse3)

package winfsp

import "errors"

// Errors of Mount.
var (
	// ErrNoFUSE is returned when cgofuse cannot load the FUSE library:
	// WinFsp is not installed on Windows (cgofuse panics "cannot find
	// winfsp"), libfuse3 is missing on Linux.
	ErrNoFUSE = errors.New("FUSE library not found (install WinFsp on Windows, libfuse3 on Linux)")
	// ErrMount is returned when the FUSE layer refuses the mount: a bad
	// mount point, a drive letter in use, or missing permission.
	ErrMount = errors.New("mount failed")
)
