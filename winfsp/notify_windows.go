//go:build windows

package winfsp

import (
	"context"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// notifyChanges tells WinFsp of every store change until ctx ends
// (fsp_fuse_notify through FileSystemHost.Notify): for each name a change
// touches (leasefs.Touches) that it now exists or is gone, and for each
// file that its attributes changed. WinFsp drops what it holds of those
// paths and sends the directory change notifications Explorer and
// FindFirstChangeNotification watchers wait for. The mount asks WinFsp
// for no caching (FileInfoTimeout=0), so a lost notification costs a
// watcher its refresh, never a stale read.
func notifyChanges(ctx context.Context, host *fuse.FileSystemHost, lfs *leasefs.FS) {
	changes := lfs.WatchChanges()
	defer changes.Close()
	for changes.Wait(ctx) == nil {
		touched, _ := changes.Take()
		for _, t := range touched {
			for _, e := range t.Entries {
				host.Notify("/"+e.Path(), entryAction(lfs, e.Path()))
			}
			for _, p := range t.Files {
				host.Notify("/"+p, fuse.NOTIFY_CHMOD|fuse.NOTIFY_UTIME|fuse.NOTIFY_TRUNCATE)
			}
		}
	}
}

// entryAction is the notification for a name a change touched: created
// (a directory or a file) if it resolves now, removed otherwise.
func entryAction(lfs *leasefs.FS, p string) uint32 {
	n, err := lfs.Walk(p)
	switch {
	case err != nil:
		return fuse.NOTIFY_UNLINK | fuse.NOTIFY_RMDIR
	case n.IsDir():
		return fuse.NOTIFY_MKDIR
	}
	return fuse.NOTIFY_CREATE
}
