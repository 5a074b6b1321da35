//go:build linux

package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// memDir is the root of the in-memory ceiling: files empty regular files,
// made once at mount, that never change, so the kernel may cache every
// entry and attribute for the timeout (an hour).
type memDir struct {
	fs.Inode
	files int
}

// memFile is one empty, read-only regular file.
type memFile struct {
	fs.Inode
}

var (
	_ fs.NodeOnAdder     = (*memDir)(nil)
	_ fs.NodeGetxattrer  = (*memDir)(nil)
	_ fs.NodeGetattrer   = (*memFile)(nil)
	_ fs.NodeGetxattrer  = (*memFile)(nil)
	_ fs.NodeListxattrer = (*memFile)(nil)
)

// memName is the name of the i-th file: the length of the names bench/run
// gives the leases it lists (benchfs create's PREFIX-<7 digits>).
func memName(i int) string { return fmt.Sprintf("ls-%07d", i) }

func (d *memDir) OnAdd(ctx context.Context) {
	for i := range d.files {
		ch := d.NewPersistentInode(ctx, &memFile{}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: uint64(i + 2)})
		d.AddChild(memName(i), ch, false)
	}
}

// Getxattr answers ENOSYS: the kernel then sends no GETXATTR again on this
// mount (fuse_conn no_getxattr) and answers EOPNOTSUPP itself, which is
// what "extended attributes off" means here.
func (d *memDir) Getxattr(context.Context, string, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (f *memFile) Getxattr(context.Context, string, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (f *memFile) Listxattr(context.Context, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// mtime is every file's modification time: the mount's start.
var mtime = time.Now()

func (f *memFile) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Nlink = 1
	out.SetTimes(nil, &mtime, &mtime)
	return 0
}

// mountMem mounts n in-memory files at mnt, with one-hour entry and
// attribute timeouts (READDIRPLUS fills both, so `ls -l` needs no LOOKUP
// or GETATTR after the listing).
func mountMem(mnt string, n int) (*fuse.Server, error) {
	hour := time.Hour
	return fs.Mount(mnt, &memDir{files: n}, &fs.Options{
		EntryTimeout: &hour,
		AttrTimeout:  &hour,
		MountOptions: mountOptions("ceilingfs-mem"),
	})
}
