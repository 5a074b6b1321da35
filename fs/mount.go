//go:build linux

// Package fs mounts the templatefs namespace (package leasefs) with
// go-fuse on Linux. It is a thin adapter: each go-fuse node holds one
// leasefs.Node, each operation calls one leasefs.FS method and maps the
// error by name (errno.go). It never touches the store directly.
package fs

import (
	"log/slog"
	"os"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"templatefs/leasefs"
)

// Names the mount shows in /proc/mounts and df: source "templatefs",
// type "fuse.templatefs".
const (
	FsName = "templatefs"
	Name   = "templatefs"
)

// maxIO is the largest READ the kernel sends: 1 MiB, the kernel's limit
// since Linux 4.20 (fuse-and-store-notes.md §A6); go-fuse defaults to 128 KiB.
const maxIO = 1 << 20

// MountOptions tunes Mount. The zero value mounts for the calling user
// only, without debug output, logging to slog.Default().
type MountOptions struct {
	// AllowOther lets other users access the mount (FUSE allow_other;
	// needs root or user_allow_other in /etc/fuse.conf).
	AllowOther bool
	// Debug logs every FUSE request and reply, at info level.
	Debug bool
	// Logger receives debug and diagnostic lines; nil means slog.Default().
	// Refusals are logged by leasefs to its own logger.
	Logger *slog.Logger
}

// Mount mounts lfs at mountpoint and serves it until the returned server
// is unmounted (server.Unmount, then server.Wait). As root it calls
// mount(2) directly (go-fuse DirectMount), falling back to fusermount3
// otherwise; the root directory has inode number leasefs.InoRoot. Errors:
// the mount error from go-fuse.
func Mount(mountpoint string, lfs *leasefs.FS, opts MountOptions) (*fuse.Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	root := &node{lfs: lfs, ln: lfs.Root()}
	return fusefs.Mount(mountpoint, root, &fusefs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:  opts.AllowOther,
			Debug:       opts.Debug,
			Logger:      slog.NewLogLogger(log.Handler(), slog.LevelInfo),
			FsName:      FsName,
			Name:        Name,
			DirectMount: os.Geteuid() == 0,
			MaxWrite:    maxIO,
		},
		RootStableAttr:  &fusefs.StableAttr{Ino: leasefs.InoRoot},
		NullPermissions: true, // leasefs sets every mode; 0 would be a bug to see, not to paper over
		Logger:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
}
