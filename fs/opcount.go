//go:build linux

package fs

import "github.com/hanwen/go-fuse/v2/fuse"

// Observer is told of the mount's requests, for metrics (cmd/templatefs
// feeds internal/metrics from it). Its methods must be cheap and safe for
// concurrent use; they decide nothing.
type Observer interface {
	// FUSEOp counts one FUSE request that reached the daemon, by
	// operation: the kernel's opcode name in lower case ("lookup",
	// "getattr", "read", "readdirplus"; "forget" once per node forgotten).
	FUSEOp(op string)
	// Passthrough reports, once mounted, whether payload reads are
	// served with FUSE passthrough (ReadPassthrough).
	Passthrough(active bool)
}

// countedFS is go-fuse's node file system, counting each request by
// operation before it is served: one line per RawFileSystem method, so
// every request the kernel sends is counted, whatever node serves it.
type countedFS struct {
	fuse.RawFileSystem
	obs Observer
}

func (c countedFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.obs.FUSEOp("lookup")
	return c.RawFileSystem.Lookup(cancel, h, name, out)
}

func (c countedFS) Forget(nodeid, nlookup uint64) {
	c.obs.FUSEOp("forget")
	c.RawFileSystem.Forget(nodeid, nlookup)
}

func (c countedFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.obs.FUSEOp("getattr")
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

func (c countedFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.obs.FUSEOp("setattr")
	return c.RawFileSystem.SetAttr(cancel, in, out)
}

func (c countedFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	c.obs.FUSEOp("mknod")
	return c.RawFileSystem.Mknod(cancel, in, name, out)
}

func (c countedFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	c.obs.FUSEOp("mkdir")
	return c.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (c countedFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c.obs.FUSEOp("unlink")
	return c.RawFileSystem.Unlink(cancel, h, name)
}

func (c countedFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c.obs.FUSEOp("rmdir")
	return c.RawFileSystem.Rmdir(cancel, h, name)
}

func (c countedFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	c.obs.FUSEOp("rename")
	return c.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (c countedFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	c.obs.FUSEOp("link")
	return c.RawFileSystem.Link(cancel, in, name, out)
}

func (c countedFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	c.obs.FUSEOp("symlink")
	return c.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (c countedFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	c.obs.FUSEOp("readlink")
	return c.RawFileSystem.Readlink(cancel, h)
}

func (c countedFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c.obs.FUSEOp("access")
	return c.RawFileSystem.Access(cancel, in)
}

func (c countedFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	c.obs.FUSEOp("getxattr")
	return c.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (c countedFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	c.obs.FUSEOp("listxattr")
	return c.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (c countedFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	c.obs.FUSEOp("setxattr")
	return c.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (c countedFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	c.obs.FUSEOp("removexattr")
	return c.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

func (c countedFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	c.obs.FUSEOp("create")
	return c.RawFileSystem.Create(cancel, in, name, out)
}

func (c countedFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	c.obs.FUSEOp("tmpfile")
	return c.RawFileSystem.Tmpfile(cancel, in, out)
}

func (c countedFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.obs.FUSEOp("open")
	return c.RawFileSystem.Open(cancel, in, out)
}

func (c countedFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.obs.FUSEOp("read")
	return c.RawFileSystem.Read(cancel, in, buf)
}

func (c countedFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	c.obs.FUSEOp("lseek")
	return c.RawFileSystem.Lseek(cancel, in, out)
}

func (c countedFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	c.obs.FUSEOp("getlk")
	return c.RawFileSystem.GetLk(cancel, in, out)
}

func (c countedFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c.obs.FUSEOp("setlk")
	return c.RawFileSystem.SetLk(cancel, in)
}

func (c countedFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c.obs.FUSEOp("setlkw")
	return c.RawFileSystem.SetLkw(cancel, in)
}

func (c countedFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.obs.FUSEOp("release")
	c.RawFileSystem.Release(cancel, in)
}

func (c countedFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	c.obs.FUSEOp("write")
	return c.RawFileSystem.Write(cancel, in, data)
}

func (c countedFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	c.obs.FUSEOp("write")
	return c.RawFileSystem.Writev(cancel, in, data)
}

func (c countedFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	c.obs.FUSEOp("copy_file_range")
	return c.RawFileSystem.CopyFileRange(cancel, in)
}

func (c countedFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	c.obs.FUSEOp("ioctl")
	return c.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (c countedFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c.obs.FUSEOp("flush")
	return c.RawFileSystem.Flush(cancel, in)
}

func (c countedFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c.obs.FUSEOp("fsync")
	return c.RawFileSystem.Fsync(cancel, in)
}

func (c countedFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	c.obs.FUSEOp("fallocate")
	return c.RawFileSystem.Fallocate(cancel, in)
}

func (c countedFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.obs.FUSEOp("opendir")
	return c.RawFileSystem.OpenDir(cancel, in, out)
}

func (c countedFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.obs.FUSEOp("readdir")
	return c.RawFileSystem.ReadDir(cancel, in, out)
}

func (c countedFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.obs.FUSEOp("readdirplus")
	return c.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (c countedFS) ReleaseDir(in *fuse.ReleaseIn) {
	c.obs.FUSEOp("releasedir")
	c.RawFileSystem.ReleaseDir(in)
}

func (c countedFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c.obs.FUSEOp("fsyncdir")
	return c.RawFileSystem.FsyncDir(cancel, in)
}

func (c countedFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	c.obs.FUSEOp("statfs")
	return c.RawFileSystem.StatFs(cancel, h, out)
}

func (c countedFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c.obs.FUSEOp("statx")
	return c.RawFileSystem.Statx(cancel, in, out)
}
