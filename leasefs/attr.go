package leasefs

import (
	"fmt"
	"io/fs"
	"time"

	"templatefs/store"
)

// textBlksize is the st_blksize reported for everything but payload files.
const textBlksize = 4096

// Attr is what stat(2) reports for a node.
type Attr struct {
	Ino     uint64
	Mode    fs.FileMode // fs.ModeDir or regular, plus permission bits
	Nlink   uint32
	Size    int64 // bytes; for text files the length of the rendered text
	Blocks  int64 // 512-byte units allocated; payloads report the backing file's
	Blksize int32 // preferred I/O size in bytes
	UID     uint32
	GID     uint32
	Atime   time.Time
	Mtime   time.Time
	Ctime   time.Time
}

// view is what a node shows now (kindFacts.render): a rendered file's
// text (nil for directories) and the times of the last change to it.
type view struct {
	text         []byte
	mtime, ctime time.Time
}

// at is a view without text, changed at t.
func at(t time.Time) view { return view{mtime: t, ctime: t} }

// Attr returns the node's attributes, read from the store now: mode and
// link count from the node table, sizes of text files the length of their
// rendered text, and their mtime and ctime the time of the last change to
// what they show (renderStore, renderStatus, renderKeyGenerations,
// leaseChanged), so rsync and make see every change; payload files report
// the backing file's size, st_blocks and st_blksize (so sparse images
// stay sparse for tar and backup tools, fuse-and-store-notes.md §D6), and
// times come from the records, never from the backing files. Errors:
// store.ErrNotFound when the node no longer exists, or the store's error.
func (f *FS) Attr(n Node) (Attr, error) {
	if err := f.enter("getattr"); err != nil {
		return Attr{}, err
	}
	defer f.leave()
	r := n.kind.facts()
	if r.content == 0 {
		return Attr{}, fmt.Errorf("attr of %s: invalid node", n)
	}
	a := Attr{Ino: n.Ino(), Mode: r.mode, Nlink: r.nlink, Blksize: textBlksize, UID: f.uid, GID: f.gid}
	a.setTimes(f.created, f.created)
	switch {
	case r.stat != nil:
		return r.stat(f, n, a)
	case r.render != nil:
		v, err := r.render(f, n)
		if err != nil {
			return Attr{}, err
		}
		a.setTimes(v.mtime, v.ctime)
		a.setText(v.text)
	}
	return a, nil
}

// leaseAttr returns the attributes and rendered record of lease file n
// holding lease l.
func (f *FS) leaseAttr(n Node, l store.Lease) (Attr, []byte, error) {
	text, err := renderLease(l)
	if err != nil {
		return Attr{}, nil, err
	}
	r := KindLeaseFile.facts()
	a := Attr{Ino: n.Ino(), Mode: r.mode, Nlink: r.nlink, Blksize: textBlksize, UID: f.uid, GID: f.gid}
	a.setTimes(leaseChanged(l), leaseChanged(l))
	a.setText(text)
	return a, text, nil
}

// payloadAttr is the stat of a payload file: the backing file's size,
// blocks and block size, the times of its publication.
func (f *FS) payloadAttr(n Node, a Attr) (Attr, error) {
	g, err := f.st.Generation(n.Generation())
	if err != nil {
		return Attr{}, err
	}
	a.setTimes(g.PublishedAt, g.PublishedAt)
	file, err := f.st.OpenPayload(g.ID, n.name)
	if err != nil {
		return Attr{}, err
	}
	fi, err := file.Stat()
	file.Close()
	if err != nil {
		return Attr{}, fmt.Errorf("stat generation %s payload %s: %w", g.ID, n.name, err)
	}
	a.Size = fi.Size()
	a.Blocks, a.Blksize = allocated(fi)
	return a, nil
}

// setText sets size and blocks of a rendered file (no-op for directories).
func (a *Attr) setText(text []byte) {
	if a.Mode.IsDir() {
		return
	}
	a.Size = int64(len(text))
	a.Blocks = (a.Size + 511) / 512
}

func (a *Attr) setTimes(mtime, ctime time.Time) {
	a.Atime, a.Mtime, a.Ctime = mtime, mtime, ctime
}
