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
	// page holds the entries fetched and not yet returned; returned is the
	// last one Readdirent returned, which READDIRPLUS looks up next.
	page     []leasefs.DirEntryPlus
	returned leasefs.DirEntryPlus
	// quiet watches for store changes since the page was read.
	quiet *quietWatch
	// last is the name of the last entry fetched; "" before the first.
	last string
	// done is set once a page came back short: the listing ended.
	done bool
}

var (
	_ = (fusefs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fusefs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fusefs.FileLookuper)((*dirHandle)(nil))
	_ = (fusefs.FileReleasedirer)((*dirHandle)(nil))
)

// Readdirent returns the next entry, fetching the next page when the
// current one is used up; nil at the end.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if len(d.page) == 0 && !d.done {
		d.quiet.close()
		d.quiet = d.n.coherence.quiet()
		page, err := d.n.lfs.ReadDirPlusFrom(d.n.ln, d.last, dirPage)
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
	d.page, d.returned = d.page[1:], e
	return &fuse.DirEntry{Name: e.Name, Mode: typeBits(e.Node), Ino: e.Node.Ino()}, 0
}

// Seekdir restarts the listing and skips off entries: go-fuse numbers
// entries 1, 2, ... in the order returned, so offset off resumes after
// the off-th (rewinddir is off 0).
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.page, d.last, d.done, d.returned = nil, "", false, leasefs.DirEntryPlus{}
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
//
// A lease comes with its attributes from the page's own store read
// (leasefs.FS.ReadDirPlusFrom), cached for long only if no change was
// emitted since that read; any other entry is looked up.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if e := d.returned; e.Name == name && e.Attr != nil {
		return d.n.entry(ctx, name, e.Node, *e.Attr, d.quiet.quiet(), out), 0
	}
	return d.n.Lookup(ctx, name, out)
}

// Releasedir ends the page's watch.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) { d.quiet.close() }
