//go:build linux

package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"templatefs/leasefs"
)

// dirPage is how many entries a dirHandle asks leasefs for at a time.
const dirPage = 512

// dirHandle is an open directory. It reads the listing a page at a time
// with leasefs.FS.ReadDirFrom, so a directory of 1,000,000 leases is never
// held whole (project issue 5, "Lists scale"), and fills d_ino with the
// inode numbers stat reports (fuse-and-store-notes.md §D6.2). go-fuse
// serialises the calls on one handle.
type dirHandle struct {
	n *node
	// page holds the entries fetched and not yet returned.
	page []leasefs.DirEntry
	// last is the name of the last entry fetched; "" before the first.
	last string
	// done is set once a page came back short: the listing ended.
	done bool
}

var (
	_ = (fusefs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fusefs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fusefs.FileLookuper)((*dirHandle)(nil))
)

// Readdirent returns the next entry, fetching the next page when the
// current one is used up; nil at the end.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if len(d.page) == 0 && !d.done {
		page, err := d.n.lfs.ReadDirFrom(d.n.ln, d.last, dirPage)
		if err != nil {
			return nil, errnoOf(err)
		}
		d.page, d.done = page, len(page) < dirPage
		if len(page) > 0 {
			d.last = page[len(page)-1].Name
		}
	}
	if len(d.page) == 0 {
		return nil, 0
	}
	e := d.page[0]
	d.page = d.page[1:]
	return &fuse.DirEntry{Name: e.Name, Mode: typeBits(e.Node), Ino: e.Node.Ino()}, 0
}

// Seekdir restarts the listing and skips off entries: go-fuse numbers
// entries 1, 2, ... in the order returned, so offset off resumes after
// the off-th (rewinddir is off 0).
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.page, d.last, d.done = nil, "", false
	for ; off > 0; off-- {
		e, errno := d.Readdirent(ctx)
		if errno != 0 {
			return errno
		}
		if e == nil {
			break
		}
	}
	return 0
}

// Lookup answers READDIRPLUS for each listed name, as a LOOKUP would:
// attributes, timeouts and an inode, so `ls -l` asks nothing more per
// entry (Coherence keeps those caches true). go-fuse keeps the inode until
// the kernel forgets it. An entry gone since its page was read gets an
// errno, which go-fuse turns into an entry without attributes (node ID 0),
// which the kernel skips (fs/fuse/readdir.c fuse_direntplus_link).
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return d.n.Lookup(ctx, name, out)
}
