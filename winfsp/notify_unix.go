//go:build linux && cgo && fuse3

package winfsp

import (
	"context"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// notifyChanges has nothing to tell libfuse3: cgofuse's init zeroes its
// entry and attribute timeouts (docs/windows.md, "Timeouts"), so the
// kernel caches no name or attribute of this mount and every look asks
// the daemon; texts are read without FOPEN_KEEP_CACHE, so each open
// reads them anew. (cgofuse's FileSystemHost.Notify is WinFsp's only.)
func notifyChanges(ctx context.Context, host *fuse.FileSystemHost, lfs *leasefs.FS) {}
