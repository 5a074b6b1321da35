package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
)

// The bbolt file format (version 2) as checkIndexFile reads it. bbolt
// writes its structs in the machine's byte order; offsets are within a
// page.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltPageHeader  = 16 // id u64, flags u16, count u16, overflow u32
	boltElement     = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	boltBucketHdr   = 16 // root pgid u64, sequence u64
	boltMetaSize    = 64 // magic, version, pageSize, flags, root bucket, freelist, pgid, txid, checksum
	boltNoFreelist  = math.MaxUint64
	boltBranchPage  = 0x01
	boltLeafPage    = 0x02
	boltFreelist    = 0x10
	boltBucketLeaf  = 0x01
	boltMinPageSize = 1 << 10 // bbolt probes page sizes 1 KiB .. 16 MiB
	boltMaxPageSize = 1 << 24
	// maxTreeDepth bounds the nesting of pages and buckets: a real index
	// is a few levels deep; a cycle or a chain made by damage is not.
	maxTreeDepth = 64
)

var native = binary.NativeEndian

// boltMeta is one decoded meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64 // root bucket's page
	freelist uint64 // boltNoFreelist when the freelist is not synced
	pgid     uint64 // high-water mark: pages [0, pgid) are in use or free
	txid     uint64
}

// checkIndexFile proves, reading the file at path without mapping it,
// that bbolt can open and walk it without touching memory outside the
// file: a valid meta page (magic, version, checksum; bbolt falls back to
// the other meta when the newer one is damaged, and so does this), a file
// as long as the meta's high-water page id times the page size, and a
// page tree whose every page lies below the high-water mark, carries its
// own id and a branch or leaf type, holds its elements, keys, values and
// inline buckets inside itself, and is reached once only. A synced
// freelist must list pages below the mark that the tree does not use (a
// freelist naming a page in use would let bbolt overwrite live data).
// Keys must be in the order bbolt's own walk at open requires (tree).
// Unreachable pages are left to bbolt's tx.Check (fsck). The error says
// what is wrong, in bytes and page ids. When the file passes, otherMeta says why the meta page bbolt
// will not use is invalid (nil when both are valid): bbolt then works
// from the older commit, as after a meta write torn by a crash.
func checkIndexFile(path string) (otherMeta, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size == 0 {
		return nil, errors.New("the file is empty")
	}
	m, otherMeta, err := readMeta(f, size)
	if err != nil {
		return nil, err
	}
	ps := int64(m.pageSize)
	if m.pgid < 2 || m.pgid > uint64(size/ps) {
		return nil, fmt.Errorf("the file is %d bytes, but its meta page (txid %d) says it holds %d pages of %d bytes (%d bytes): it was cut short",
			size, m.txid, m.pgid, ps, m.pgid*uint64(ps))
	}
	w := &treeWalk{f: f, ps: ps, hwm: m.pgid, used: make([]bool, m.pgid)}
	w.used[0], w.used[1] = true, true
	if _, err := w.tree(m.root, 0, nil, nil); err != nil {
		return nil, err
	}
	if m.freelist != boltNoFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return nil, err
		}
	}
	return otherMeta, nil
}

// readMeta returns the meta page bbolt will use, found as bbolt finds it,
// and why the other meta page is invalid (nil when it is valid). bbolt
// takes its page size from the first meta page that passes its own check
// (magic, version, checksum: metaAt), meta 0 if the file has its first
// 4 KiB, else the first at the offsets it probes for meta 1, and trusts
// that page size whatever it is; of the two metas at that page size it
// uses the one with the higher txid if valid, else the other. The page
// size, and the meta's own, must then be sane, or the file is refused:
// bbolt would read every page at the wrong offsets.
func readMeta(f *os.File, size int64) (m boltMeta, otherMeta, err error) {
	ps, err := pageSizeOf(f, size)
	if err != nil {
		return boltMeta{}, nil, err
	}
	if size < 2*ps {
		return boltMeta{}, nil, fmt.Errorf("the file is %d bytes, less than its two meta pages of %d bytes each (%d bytes)", size, ps, 2*ps)
	}
	m0, err0 := metaAt(f, 0)
	m1, err1 := metaAt(f, ps)
	a, b := metaChoice{0, m0, err0}, metaChoice{1, m1, err1}
	if m1.txid > m0.txid {
		a, b = b, a
	}
	switch {
	case a.err == nil:
	case b.err == nil:
		a, b = b, a
	default:
		return boltMeta{}, nil, fmt.Errorf("both meta pages are invalid (meta 0: %v; meta 1: %v)", err0, err1)
	}
	if a.m.pageSize != uint32(ps) {
		return boltMeta{}, nil, fmt.Errorf("meta page %d (txid %d) says page size %d, but bbolt reads the file in pages of %d bytes", a.n, a.m.txid, a.m.pageSize, ps)
	}
	if b.err != nil {
		otherMeta = fmt.Errorf("meta page %d: %w", b.n, b.err)
	}
	return a.m, otherMeta, nil
}

// metaChoice is meta page n, decoded, and why it is invalid (nil: valid).
type metaChoice struct {
	n   int
	m   boltMeta
	err error
}

// pageSizeOf returns the page size bbolt opens the file with (its
// DB.getPageSize): that of meta 0 if the file's first 4 KiB can be read
// and meta 0 is valid, else that of the first valid meta at 1 KiB, 2 KiB,
// ... 16 MiB (offsets more than 1 KiB before the end). It refuses a page
// size that is not a power of two in [1 KiB, 16 MiB].
func pageSizeOf(f *os.File, size int64) (int64, error) {
	const firstRead = 0x1000 // bbolt reads 4 KiB for meta 0
	why0 := fmt.Errorf("the file is %d bytes, less than its two meta pages", size)
	if size >= firstRead {
		m, err := metaAt(f, 0)
		if err == nil {
			return sanePageSize(m.pageSize, "meta page 0")
		}
		why0 = err
	}
	for off := int64(boltMinPageSize); off <= boltMaxPageSize && off < size-boltMinPageSize; off <<= 1 {
		if m, err := metaAt(f, off); err == nil {
			return sanePageSize(m.pageSize, fmt.Sprintf("the meta page at byte %d", off))
		}
	}
	if size < firstRead {
		return 0, why0
	}
	return 0, fmt.Errorf("no valid meta page (meta 0: %v; no valid meta 1 at any page size)", why0)
}

// sanePageSize returns n if it is a page size bbolt can have written.
func sanePageSize(n uint32, what string) (int64, error) {
	if n < boltMinPageSize || n > boltMaxPageSize || n&(n-1) != 0 {
		return 0, fmt.Errorf("%s says page size %d, not a power of two from %d to %d", what, n, boltMinPageSize, boltMaxPageSize)
	}
	return int64(n), nil
}

// metaAt decodes the meta page at byte offset off and checks it as bbolt
// does (its Meta.Validate): magic, version, checksum. The fields are
// decoded also when it is invalid.
func metaAt(f *os.File, off int64) (boltMeta, error) {
	buf := make([]byte, boltPageHeader+boltMetaSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return boltMeta{}, fmt.Errorf("the file ends inside it (at byte %d)", off)
		}
		return boltMeta{}, err
	}
	b := buf[boltPageHeader:]
	m := boltMeta{
		pageSize: native.Uint32(b[8:]),
		root:     native.Uint64(b[16:]),
		freelist: native.Uint64(b[32:]),
		pgid:     native.Uint64(b[40:]),
		txid:     native.Uint64(b[48:]),
	}
	h := fnv.New64a()
	h.Write(b[:56])
	switch {
	case native.Uint32(b[0:]) != boltMagic:
		return m, errors.New("not a bbolt meta page (bad magic)")
	case native.Uint32(b[4:]) != boltVersion:
		return m, fmt.Errorf("bbolt file format version %d, want %d", native.Uint32(b[4:]), boltVersion)
	case native.Uint64(b[56:]) != h.Sum64():
		return m, errors.New("checksum mismatch")
	}
	return m, nil
}

// treeWalk follows a page tree from the file, marking the pages it uses.
type treeWalk struct {
	f    *os.File
	ps   int64
	hwm  uint64
	used []bool   // by page id: meta, tree or freelist
	bufs [][]byte // page buffers by tree depth, reused: a page is read while its parents are in use
}

// page reads page id with its overflow pages after checking that they
// lie below the high-water mark and were not reached before, and marks
// them used. The result is valid until the next page call at this depth.
func (w *treeWalk) page(id uint64, depth int, what string) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("%s names page %d, outside the pages in use [2, %d)", what, id, w.hwm)
	}
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, make([]byte, w.ps))
	}
	buf := w.bufs[depth][:w.ps]
	if _, err := w.f.ReadAt(buf, int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	if got := native.Uint64(buf); got != id {
		return nil, fmt.Errorf("page %d (%s) carries id %d", id, what, got)
	}
	overflow := uint64(native.Uint32(buf[12:]))
	if overflow >= w.hwm-id {
		return nil, fmt.Errorf("page %d (%s) runs %d overflow pages past the pages in use [2, %d)", id, what, overflow, w.hwm)
	}
	for p := id; p <= id+overflow; p++ {
		if w.used[p] {
			return nil, fmt.Errorf("page %d (%s) is reached twice", p, what)
		}
		w.used[p] = true
	}
	if overflow > 0 {
		buf = append(buf, make([]byte, int64(overflow)*w.ps)...)
		if _, err := w.f.ReadAt(buf[w.ps:], int64(id+1)*w.ps); err != nil {
			return nil, fmt.Errorf("read page %d: %w", id, err)
		}
		w.bufs[depth] = buf
	}
	return buf, nil
}

// tree checks the page tree rooted at page id, depth levels down, and
// the buckets below it. Its keys must increase strictly and lie in
// [lo, hi) (nil: unbounded), the order bbolt's own walk at open checks:
// an error there is raised while that walk's goroutine still reads pages
// of a transaction being closed, so it must never happen. It returns the
// subtree's greatest key, as that walk computes it (a copy).
func (w *treeWalk) tree(id uint64, depth int, lo, hi []byte) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, fmt.Errorf("page %d is %d levels deep", id, depth)
	}
	p, err := w.page(id, depth, "the tree")
	if err != nil {
		return nil, err
	}
	flags, count := native.Uint16(p[8:]), int(native.Uint16(p[10:]))
	if boltPageHeader+count*boltElement > len(p) {
		return nil, fmt.Errorf("page %d has %d elements, more than fit in %d bytes", id, count, len(p))
	}
	switch flags {
	case boltBranchPage:
		return w.branch(p, id, count, depth, lo, hi)
	case boltLeafPage:
		return w.leaf(p, fmt.Sprintf("leaf page %d", id), depth, lo, hi)
	}
	return nil, fmt.Errorf("page %d in the tree has type %#x, not branch or leaf", id, flags)
}

// branch checks branch page p (page id, count elements) and its children.
func (w *treeWalk) branch(p []byte, id uint64, count, depth int, lo, hi []byte) ([]byte, error) {
	if count == 0 {
		return nil, fmt.Errorf("branch page %d has no elements", id)
	}
	keys := make([][]byte, count)
	for i := range keys {
		e := boltPageHeader + i*boltElement
		pos, ksize := uint64(native.Uint32(p[e:])), uint64(native.Uint32(p[e+4:]))
		if uint64(e)+pos+ksize > uint64(len(p)) {
			return nil, fmt.Errorf("branch page %d element %d: key of %d bytes at %d runs past the page", id, i, ksize, pos)
		}
		keys[i] = p[uint64(e)+pos : uint64(e)+pos+ksize]
	}
	what := fmt.Sprintf("branch page %d", id)
	running, greatest := lo, []byte(nil)
	for i, key := range keys {
		if err := keyOrder(what, i, key, running, hi); err != nil {
			return nil, err
		}
		next := hi
		if i+1 < count {
			next = keys[i+1]
		}
		var err error
		if greatest, err = w.tree(native.Uint64(p[boltPageHeader+i*boltElement+8:]), depth+1, key, next); err != nil {
			return nil, err
		}
		running = greatest
	}
	return greatest, nil
}

// keyOrder checks element i's key against the previous key (the bound
// for the first) and the upper bound hi, as bbolt's verifyKeyOrder does.
func keyOrder(what string, i int, key, prev, hi []byte) error {
	switch {
	case i == 0 && prev != nil && bytes.Compare(prev, key) > 0:
		return fmt.Errorf("%s element 0: key %x is below its parent's %x", what, key, prev)
	case i > 0 && bytes.Compare(prev, key) >= 0:
		return fmt.Errorf("%s element %d: key %x is not above the previous key %x", what, i, key, prev)
	case hi != nil && bytes.Compare(key, hi) >= 0:
		return fmt.Errorf("%s element %d: key %x is not below the next key of its parent %x", what, i, key, hi)
	}
	return nil
}

// leaf checks the elements of leaf page p (a page of the file, or an
// inline bucket's page inside a value), keys in [lo, hi), and the buckets
// they hold, and returns its last key (a copy).
func (w *treeWalk) leaf(p []byte, what string, depth int, lo, hi []byte) ([]byte, error) {
	count := int(native.Uint16(p[10:]))
	if boltPageHeader+count*boltElement > len(p) {
		return nil, fmt.Errorf("%s has %d elements, more than fit in %d bytes", what, count, len(p))
	}
	running := lo
	for i := range count {
		e := boltPageHeader + i*boltElement
		flags := native.Uint32(p[e:])
		pos, ksize, vsize := uint64(native.Uint32(p[e+4:])), uint64(native.Uint32(p[e+8:])), uint64(native.Uint32(p[e+12:]))
		end := uint64(e) + pos + ksize + vsize
		if end > uint64(len(p)) {
			return nil, fmt.Errorf("%s element %d: key and value of %d bytes at %d run past it", what, i, ksize+vsize, pos)
		}
		key := p[end-vsize-ksize : end-vsize]
		if err := keyOrder(what, i, key, running, hi); err != nil {
			return nil, err
		}
		running = key
		switch flags {
		case 0:
			continue
		case boltBucketLeaf:
		default:
			return nil, fmt.Errorf("%s element %d has flags %#x", what, i, flags)
		}
		v := p[end-vsize : end]
		if vsize < boltBucketHdr {
			return nil, fmt.Errorf("%s element %d: bucket header of %d bytes, want %d", what, i, vsize, boltBucketHdr)
		}
		if depth+1 > maxTreeDepth {
			return nil, fmt.Errorf("%s element %d: buckets nested %d deep", what, i, depth+1)
		}
		if root := native.Uint64(v); root != 0 {
			if _, err := w.tree(root, depth+1, nil, nil); err != nil {
				return nil, err
			}
			continue
		}
		inline := v[boltBucketHdr:]
		if len(inline) < boltPageHeader {
			return nil, fmt.Errorf("%s element %d: inline bucket of %d bytes has no page header", what, i, len(inline))
		}
		if flags := native.Uint16(inline[8:]); flags != boltLeafPage {
			return nil, fmt.Errorf("%s element %d: inline bucket page has type %#x, not leaf", what, i, flags)
		}
		if _, err := w.leaf(inline, fmt.Sprintf("the inline bucket of %s element %d", what, i), depth+1, nil, nil); err != nil {
			return nil, err
		}
	}
	if count == 0 {
		return nil, nil
	}
	return bytes.Clone(running), nil
}

// freelist checks the synced freelist at page id: a freelist page whose
// ids lie below the high-water mark, are listed once and are not used.
func (w *treeWalk) freelist(id uint64) error {
	p, err := w.page(id, 0, "the meta's freelist")
	if err != nil {
		return err
	}
	if flags := native.Uint16(p[8:]); flags != boltFreelist {
		return fmt.Errorf("freelist page %d has type %#x", id, flags)
	}
	start, count := uint64(boltPageHeader), uint64(native.Uint16(p[10:]))
	if count == math.MaxUint16 { // the count is in the first element
		if len(p) < boltPageHeader+8 {
			return fmt.Errorf("freelist page %d is too short for its count", id)
		}
		start, count = start+8, native.Uint64(p[boltPageHeader:])
	}
	if count > (uint64(len(p))-start)/8 {
		return fmt.Errorf("freelist page %d lists %d pages, more than fit in %d bytes", id, count, len(p))
	}
	listed := make(map[uint64]bool, count)
	for i := range count {
		free := native.Uint64(p[start+8*i:])
		switch {
		case free < 2 || free >= w.hwm:
			return fmt.Errorf("freelist page %d lists page %d, outside the pages in use [2, %d)", id, free, w.hwm)
		case w.used[free]:
			return fmt.Errorf("freelist page %d lists page %d, which is in use", id, free)
		case listed[free]:
			return fmt.Errorf("freelist page %d lists page %d twice", id, free)
		}
		listed[free] = true
	}
	return nil
}
