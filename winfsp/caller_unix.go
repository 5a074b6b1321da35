//go:build linux && cgo && fuse3

package winfsp

import (
	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// callerOf returns the credentials and pid (the calling thread's) libfuse
// reports for the request being served (fuse_get_context); call it only
// from a callback.
func (f *fileSystem) callerOf() leasefs.Caller {
	uid, _, pid := fuse.Getcontext()
	return leasefs.Caller{UID: uid, PID: pid}
}

// platformOwners is nil on Linux: libfuse reports the kernel's uids, so
// leasefs's own rule (the store owner and root) applies.
func platformOwners() ([]uint32, error) { return nil, nil }
