//go:build linux

package main

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// mountLoopback mounts go-fuse's loopback node over dir at mnt, with the
// options of go-fuse's example/loopback (one-second entry and attribute
// timeouts, libfuse's defaults; no negative caching): each
// open(O_CREAT|O_EXCL) + close in one directory costs a LOOKUP, a CREATE
// and a RELEASE, and the loopback syncs nothing.
func mountLoopback(mnt, dir string) (*fuse.Server, error) {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return nil, err
	}
	sec := time.Second
	return fs.Mount(mnt, root, &fs.Options{
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NullPermissions: true,
		MountOptions:    mountOptions(dir),
	})
}
