package leasefs

import (
	"fmt"
	"io/fs"
	"time"

	"templatefs/store"
)

// Modes of the tree: directories are read-only except the leases
// directories (create acquires, unlink releases); lease and ctl files take
// writes (commands); everything else is 0444. Every node is readable by
// all: with allow_other other users may read (project issue 3). The
// modes are informative: the mount has no default_permissions, and
// leasefs itself decides who may change what (Caller, ErrAccess).
const (
	modeDir       = fs.ModeDir | 0o555
	modeLeasesDir = fs.ModeDir | 0o755
	modeText      = 0o444
	modeLease     = 0o644
	modeCtl       = 0o644
	modePayload   = 0o444
)

// leaseNames is a lease file's link count: its names under its
// generation's leases/, under leases/ and under its key's leases/.
const leaseNames = 3

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

// Attr returns the node's attributes, read from the store now: sizes of
// text files are the length of their rendered text, and their mtime and
// ctime the time of the last change to what they show (renderStore,
// renderStatus, renderKeyGenerations, leaseChanged), so rsync and make
// see every change; payload files report
// the backing file's size, st_blocks and st_blksize (so sparse images
// stay sparse for tar and backup tools, fuse-and-store-notes.md §D6), and
// times come from the records, never from the backing files. Errors:
// store.ErrNotFound when the node no longer exists, or the store's error.
func (f *FS) Attr(n Node) (Attr, error) {
	if err := f.enter("getattr"); err != nil {
		return Attr{}, err
	}
	defer f.leave()
	a := Attr{Ino: n.Ino(), Nlink: 1, Blksize: textBlksize, UID: f.uid, GID: f.gid}
	a.setTimes(f.created, f.created)
	var text []byte
	switch n.kind {
	case KindRoot:
		a.Mode, a.Nlink = modeDir, 2+6 // keys, generations, leases, tombstones, retiring, incoming
	case KindKeysDir, KindGenerationsDir, KindTombstonesDir, KindRetiringDir:
		// Link count 1, "subdirectories not counted" as on btrfs, so find
		// does not skip subdirectories: counting them would walk the index
		// on every stat of a path through here.
		a.Mode, a.Nlink = modeDir, 1
	case KindLeasesDir:
		a.Mode, a.Nlink = modeLeasesDir, 2
	case KindIndexFile:
		return f.indexAttr(a)
	case KindEventsFile:
		a.Mode = modeText // size 0: a stream, read with direct I/O
	case KindMetricsFile:
		return f.metricsAttr(a)
	case KindStoreFile:
		var changed time.Time
		var err error
		if text, changed, err = f.renderStore(); err != nil {
			return Attr{}, err
		}
		a.setTimes(changed, changed)
		a.Mode = modeText
	case KindKeyDir, KindKeyFile, KindKeyLeasesDir:
		k, err := f.key(n)
		if err != nil {
			return Attr{}, err
		}
		a.setTimes(k.CreatedAt, k.CreatedAt)
		switch n.kind {
		case KindKeyDir:
			a.Mode, a.Nlink = modeDir, 2+1 // leases
		case KindKeyLeasesDir:
			a.Mode, a.Nlink = modeLeasesDir, 2
		default:
			a.Mode, text = modeText, []byte(k.Canonical)
		}
	case KindKeyGenerationsFile:
		var newest time.Time
		var err error
		if text, newest, err = f.renderKeyGenerations(n); err != nil {
			return Attr{}, err
		}
		a.setTimes(newest, newest)
		a.Mode = modeText
	case KindGenerationDir, KindManifestFile, KindStatusFile, KindCtlFile, KindPayloadDir, KindPayloadFile, KindGenerationLeasesDir:
		return f.generationAttr(n, a)
	case KindLeaseFile:
		l, err := f.lease(n)
		if err != nil {
			return Attr{}, err
		}
		a, _, err := f.leaseAttr(n, l)
		return a, err
	case KindIncomingDir, KindIncomingEntryDir, KindIncomingFile, KindIncomingCtlFile, KindIncomingStatusFile:
		return f.incomingAttr(n, a)
	default:
		return Attr{}, fmt.Errorf("attr of %s: invalid node", n)
	}
	a.setText(text)
	return a, nil
}

// leaseAttr returns the attributes and rendered record of lease file n
// holding lease l.
func (f *FS) leaseAttr(n Node, l store.Lease) (Attr, []byte, error) {
	text, err := renderLease(l)
	if err != nil {
		return Attr{}, nil, err
	}
	a := Attr{Ino: n.Ino(), Mode: modeLease, Nlink: leaseNames, Blksize: textBlksize, UID: f.uid, GID: f.gid}
	a.setTimes(leaseChanged(l), leaseChanged(l))
	a.setText(text)
	return a, text, nil
}

func (f *FS) generationAttr(n Node, a Attr) (Attr, error) {
	g, err := f.st.Generation(n.Generation())
	if err != nil {
		return Attr{}, err
	}
	a.setTimes(g.PublishedAt, g.PublishedAt)
	var text []byte
	switch n.kind {
	case KindGenerationDir:
		a.Mode, a.Nlink = modeDir, 2+2 // payload, leases
		if t := g.Tombstone; t != nil {
			a.Ctime = t.At // the rename into tombstones/ changed it
		}
	case KindPayloadDir:
		a.Mode, a.Nlink = modeDir, 2
	case KindGenerationLeasesDir:
		a.Mode, a.Nlink = modeLeasesDir, 2
	case KindManifestFile:
		if text, err = f.renderManifest(g.ID); err != nil {
			return Attr{}, err
		}
		a.Mode = modeText
	case KindCtlFile:
		a.Mode, text = modeCtl, ctlText
	case KindStatusFile:
		var changed time.Time
		if text, changed, err = f.renderStatus(g); err != nil {
			return Attr{}, err
		}
		a.setTimes(changed, changed)
		a.Mode = modeText
	case KindPayloadFile:
		file, err := f.st.OpenPayload(g.ID, n.name)
		if err != nil {
			return Attr{}, err
		}
		fi, err := file.Stat()
		file.Close()
		if err != nil {
			return Attr{}, fmt.Errorf("stat generation %s payload %s: %w", g.ID, n.name, err)
		}
		a.Mode, a.Size = modePayload, fi.Size()
		a.Blocks, a.Blksize = allocated(fi)
		return a, nil
	}
	a.setText(text)
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
