//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"runtime"
	"sync"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// dirPage is how many entries Readdir asks leasefs for at a time.
const dirPage = 512

// pagedReaddir says whether Readdir fills a page at a time, numbering
// entries with offsets, so that libfuse asks again for the rest once the
// kernel's buffer is full. WinFsp's FUSE layer reads a listing with one
// readdir at offset 0 and keeps it (it treats a full buffer at a non-zero
// offset as the end), so there the whole directory is filled in one call.
var pagedReaddir = runtime.GOOS != "windows"

// dirCursor is an open directory: where its listing stands. Offsets are
// ordinals: "." is 1, ".." is 2, and the i-th entry (from 1) is i+2, so the
// offset libfuse passes back is the number of entries already taken.
type dirCursor struct {
	// mu serialises the Readdirs of one handle: libfuse does too, with a
	// lock of its own that the race detector cannot see.
	mu   sync.Mutex
	node leasefs.Node
	// off is the offset of the last entry filled, and last its name (""
	// for "." and ".."): a Readdir at off resumes after last.
	off  int64
	last string
}

// Opendir checks that p is a directory and opens a cursor on it.
func (f *fileSystem) Opendir(p string) (int, uint64) {
	n, err := f.walk(p)
	switch {
	case err != nil:
		return errnoOf(err), noHandle
	case !n.IsDir():
		return -fuse.ENOTDIR, noHandle
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.dirs[f.next] = &dirCursor{node: n}
	return 0, f.next
}

// Releasedir forgets the cursor.
func (f *fileSystem) Releasedir(p string, fh uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.dirs, fh)
	return 0
}

// Readdir fills entries of the directory from offset ofst on, each with
// its stat, so readdir-plus and WinFsp need no Getattr per entry and
// d_ino equals st_ino (use_ino). It reads the listing a page at a time
// with leasefs.FS.ReadDirFrom and, where pagedReaddir, stops when fill
// reports the kernel's buffer full, so listing 1,000,000 leases never
// renders more than the entries one READDIR returns. An ofst other than
// the cursor's own (a seekdir) relists from the start and skips ofst
// entries. An entry that vanishes between its page and its stat is left
// out; none is listed twice.
func (f *fileSystem) Readdir(p string, fill func(name string, st *fuse.Stat_t, ofst int64) bool, ofst int64, fh uint64) int {
	c, err := f.cursor(p, fh, ofst)
	if err != nil {
		return errnoOf(err)
	}
	defer c.mu.Unlock()
	offset := func(o int64) int64 {
		if pagedReaddir {
			return o
		}
		return 0
	}
	for c.off < 2 {
		name := [...]string{".", ".."}[c.off]
		if !fill(name, nil, offset(c.off+1)) {
			return 0
		}
		c.off++
	}
	for {
		page, err := f.lfs.ReadDirFrom(c.node, c.last, dirPage)
		if err != nil {
			return errnoOf(err)
		}
		for _, e := range page {
			a, err := f.lfs.Attr(e.Node)
			if err != nil {
				c.last = e.Name // gone since its page: skipped, not renumbered
				continue
			}
			var st fuse.Stat_t
			fillStat(a, &st)
			if !fill(e.Name, &st, offset(c.off+1)) {
				return 0
			}
			c.off, c.last = c.off+1, e.Name
		}
		if len(page) < dirPage {
			return 0
		}
	}
}

// cursor returns the cursor of open directory fh, locked, positioned at
// ofst: as it stands if ofst is where it stopped, else rewound and moved
// forward ofst entries. Without a handle (fh unknown) it lists p from the
// start.
func (f *fileSystem) cursor(p string, fh uint64, ofst int64) (*dirCursor, error) {
	f.mu.Lock()
	c, ok := f.dirs[fh]
	f.mu.Unlock()
	if !ok || fh == noHandle {
		n, err := f.walk(p)
		if err != nil {
			return nil, err
		}
		c = &dirCursor{node: n}
	}
	c.mu.Lock()
	if ofst == c.off && ofst > 0 {
		return c, nil
	}
	c.off, c.last = min(ofst, 2), ""
	for skip := ofst - c.off; skip > 0; {
		page, err := f.lfs.ReadDirFrom(c.node, c.last, int(min(skip, dirPage)))
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		for _, e := range page {
			c.off, c.last = c.off+1, e.Name
		}
		skip -= int64(len(page))
		if len(page) == 0 {
			break
		}
	}
	return c, nil
}
