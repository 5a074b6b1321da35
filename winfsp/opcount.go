//go:build windows || (linux && cgo && fuse3)

package winfsp

import "github.com/winfsp/cgofuse/fuse"

// Observer is told of the mount's requests, for metrics (cmd/templatefs
// feeds internal/metrics from it). Its methods must be cheap and safe for
// concurrent use; they decide nothing.
type Observer interface {
	// FUSEOp counts one callback from the FUSE layer, by the callback's
	// name in lower case ("getattr", "open", "read", "readdir").
	FUSEOp(op string)
}

// countedFileSystem is fileSystem, counting each callback before it is
// served: one method per callback cgofuse makes (FileSystemInterface and
// the extensions fileSystem implements: OpenEx, CreateEx, Chmod3,
// Chown3, Utimens3, Rename3, which cgofuse calls instead of their plain
// forms). Init and Destroy are not requests.
type countedFileSystem struct {
	*fileSystem
	obs Observer
}

func (c countedFileSystem) Statfs(p string, st *fuse.Statfs_t) int {
	c.obs.FUSEOp("statfs")
	return c.fileSystem.Statfs(p, st)
}

func (c countedFileSystem) Mknod(p string, mode uint32, dev uint64) int {
	c.obs.FUSEOp("mknod")
	return c.fileSystem.Mknod(p, mode, dev)
}

func (c countedFileSystem) Mkdir(p string, mode uint32) int {
	c.obs.FUSEOp("mkdir")
	return c.fileSystem.Mkdir(p, mode)
}

func (c countedFileSystem) Unlink(p string) int {
	c.obs.FUSEOp("unlink")
	return c.fileSystem.Unlink(p)
}

func (c countedFileSystem) Rmdir(p string) int {
	c.obs.FUSEOp("rmdir")
	return c.fileSystem.Rmdir(p)
}

func (c countedFileSystem) Link(oldpath, newpath string) int {
	c.obs.FUSEOp("link")
	return c.fileSystem.Link(oldpath, newpath)
}

func (c countedFileSystem) Symlink(target, newpath string) int {
	c.obs.FUSEOp("symlink")
	return c.fileSystem.Symlink(target, newpath)
}

func (c countedFileSystem) Readlink(p string) (int, string) {
	c.obs.FUSEOp("readlink")
	return c.fileSystem.Readlink(p)
}

func (c countedFileSystem) Rename(oldpath, newpath string) int {
	c.obs.FUSEOp("rename")
	return c.fileSystem.Rename(oldpath, newpath)
}

func (c countedFileSystem) Rename3(oldpath, newpath string, flags uint32) int {
	c.obs.FUSEOp("rename")
	return c.fileSystem.Rename3(oldpath, newpath, flags)
}

func (c countedFileSystem) Chmod(p string, mode uint32) int {
	c.obs.FUSEOp("chmod")
	return c.fileSystem.Chmod(p, mode)
}

func (c countedFileSystem) Chmod3(p string, mode uint32, fh uint64) int {
	c.obs.FUSEOp("chmod")
	return c.fileSystem.Chmod3(p, mode, fh)
}

func (c countedFileSystem) Chown(p string, uid, gid uint32) int {
	c.obs.FUSEOp("chown")
	return c.fileSystem.Chown(p, uid, gid)
}

func (c countedFileSystem) Chown3(p string, uid, gid uint32, fh uint64) int {
	c.obs.FUSEOp("chown")
	return c.fileSystem.Chown3(p, uid, gid, fh)
}

func (c countedFileSystem) Utimens(p string, tmsp []fuse.Timespec) int {
	c.obs.FUSEOp("utimens")
	return c.fileSystem.Utimens(p, tmsp)
}

func (c countedFileSystem) Utimens3(p string, tmsp []fuse.Timespec, fh uint64) int {
	c.obs.FUSEOp("utimens")
	return c.fileSystem.Utimens3(p, tmsp, fh)
}

func (c countedFileSystem) Access(p string, mask uint32) int {
	c.obs.FUSEOp("access")
	return c.fileSystem.Access(p, mask)
}

func (c countedFileSystem) Create(p string, flags int, mode uint32) (int, uint64) {
	c.obs.FUSEOp("create")
	return c.fileSystem.Create(p, flags, mode)
}

func (c countedFileSystem) CreateEx(p string, mode uint32, fi *fuse.FileInfo_t) int {
	c.obs.FUSEOp("create")
	return c.fileSystem.CreateEx(p, mode, fi)
}

func (c countedFileSystem) Open(p string, flags int) (int, uint64) {
	c.obs.FUSEOp("open")
	return c.fileSystem.Open(p, flags)
}

func (c countedFileSystem) OpenEx(p string, fi *fuse.FileInfo_t) int {
	c.obs.FUSEOp("open")
	return c.fileSystem.OpenEx(p, fi)
}

func (c countedFileSystem) Getattr(p string, st *fuse.Stat_t, fh uint64) int {
	c.obs.FUSEOp("getattr")
	return c.fileSystem.Getattr(p, st, fh)
}

func (c countedFileSystem) Truncate(p string, size int64, fh uint64) int {
	c.obs.FUSEOp("truncate")
	return c.fileSystem.Truncate(p, size, fh)
}

func (c countedFileSystem) Read(p string, buff []byte, ofst int64, fh uint64) int {
	c.obs.FUSEOp("read")
	return c.fileSystem.Read(p, buff, ofst, fh)
}

func (c countedFileSystem) Write(p string, buff []byte, ofst int64, fh uint64) int {
	c.obs.FUSEOp("write")
	return c.fileSystem.Write(p, buff, ofst, fh)
}

func (c countedFileSystem) Flush(p string, fh uint64) int {
	c.obs.FUSEOp("flush")
	return c.fileSystem.Flush(p, fh)
}

func (c countedFileSystem) Release(p string, fh uint64) int {
	c.obs.FUSEOp("release")
	return c.fileSystem.Release(p, fh)
}

func (c countedFileSystem) Fsync(p string, datasync bool, fh uint64) int {
	c.obs.FUSEOp("fsync")
	return c.fileSystem.Fsync(p, datasync, fh)
}

func (c countedFileSystem) Opendir(p string) (int, uint64) {
	c.obs.FUSEOp("opendir")
	return c.fileSystem.Opendir(p)
}

func (c countedFileSystem) Readdir(p string, fill func(name string, st *fuse.Stat_t, ofst int64) bool, ofst int64, fh uint64) int {
	c.obs.FUSEOp("readdir")
	return c.fileSystem.Readdir(p, fill, ofst, fh)
}

func (c countedFileSystem) Releasedir(p string, fh uint64) int {
	c.obs.FUSEOp("releasedir")
	return c.fileSystem.Releasedir(p, fh)
}

func (c countedFileSystem) Fsyncdir(p string, datasync bool, fh uint64) int {
	c.obs.FUSEOp("fsyncdir")
	return c.fileSystem.Fsyncdir(p, datasync, fh)
}

func (c countedFileSystem) Setxattr(p, name string, value []byte, flags int) int {
	c.obs.FUSEOp("setxattr")
	return c.fileSystem.Setxattr(p, name, value, flags)
}

func (c countedFileSystem) Getxattr(p, name string) (int, []byte) {
	c.obs.FUSEOp("getxattr")
	return c.fileSystem.Getxattr(p, name)
}

func (c countedFileSystem) Removexattr(p, name string) int {
	c.obs.FUSEOp("removexattr")
	return c.fileSystem.Removexattr(p, name)
}

func (c countedFileSystem) Listxattr(p string, fill func(name string) bool) int {
	c.obs.FUSEOp("listxattr")
	return c.fileSystem.Listxattr(p, fill)
}
