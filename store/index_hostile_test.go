package store

import (
	"encoding/binary"
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"
)

// setMeta rewrites fields of the meta page at byte offset off of dir's
// index.db and gives it a valid checksum again, as a hostile or
// miscomputed index would have: bbolt trusts a meta whose checksum holds.
func setMeta(t *testing.T, dir string, off int64, change func(b []byte)) {
	t.Helper()
	path := filepath.Join(dir, IndexFile)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, boltPageHeader+boltMetaSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	b := buf[boltPageHeader:]
	change(b)
	h := fnv.New64a()
	h.Write(b[:56])
	binary.NativeEndian.PutUint64(b[56:], h.Sum64())
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
}

// TestOpenIndexHostileMeta: meta pages whose checksum is valid but whose
// fields are not (bbolt checks only magic, version and checksum) are
// ErrIndexCorrupt, never a crash: the page size bbolt would use is the
// one checked.
func TestOpenIndexHostileMeta(t *testing.T) {
	base := damageBase(t)
	m, used := indexLayout(t, filepath.Join(base, IndexFile))
	ps := int64(m.pageSize)
	var branch uint64
	for id := uint64(2); id < m.pgid && branch == 0; id++ {
		if !used[id] {
			continue
		}
		f, err := os.ReadFile(filepath.Join(base, IndexFile))
		if err != nil {
			t.Fatal(err)
		}
		if binary.NativeEndian.Uint16(f[int64(id)*ps+8:]) == boltBranchPage {
			branch = id
		}
	}
	if branch == 0 {
		t.Fatal("the base index has no branch page")
	}
	both := func(change func(b []byte)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			setMeta(t, dir, 0, change)
			setMeta(t, dir, ps, change)
		}
	}
	pageSize := func(n uint32) func(b []byte) {
		return func(b []byte) { binary.NativeEndian.PutUint32(b[8:], n) }
	}
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		detail string
	}{
		{"meta 0 page size not a power of two", func(t *testing.T, dir string) { setMeta(t, dir, 0, pageSize(3000)) }, "page size 3000"},
		{"meta 0 page size below 1 KiB", func(t *testing.T, dir string) { setMeta(t, dir, 0, pageSize(512)) }, "page size 512"},
		{"meta 0 page size above 16 MiB", func(t *testing.T, dir string) { setMeta(t, dir, 0, pageSize(1<<25)) }, "page size 33554432"},
		{"meta 0 page size doubled", func(t *testing.T, dir string) { setMeta(t, dir, 0, pageSize(uint32(2*ps))) }, "index.db"},
		{"newer meta 1 with another page size and a bad root", func(t *testing.T, dir string) {
			setMeta(t, dir, ps, func(b []byte) {
				binary.NativeEndian.PutUint32(b[8:], uint32(2*ps))
				binary.NativeEndian.PutUint64(b[16:], 1)
				binary.NativeEndian.PutUint64(b[48:], m.txid+10)
			})
		}, "says page size"},
		{"pgid huge", both(func(b []byte) { binary.NativeEndian.PutUint64(b[40:], 1<<62) }), "it was cut short"},
		{"pgid below the metas", both(func(b []byte) { binary.NativeEndian.PutUint64(b[40:], 1) }), "it was cut short"},
		{"root is a meta page", both(func(b []byte) { binary.NativeEndian.PutUint64(b[16:], 1) }), "outside the pages in use"},
		{"root beyond the file", both(func(b []byte) { binary.NativeEndian.PutUint64(b[16:], m.pgid) }), "outside the pages in use"},
		{"freelist beyond the file", both(func(b []byte) { binary.NativeEndian.PutUint64(b[32:], m.pgid+5) }), "outside the pages in use"},
		{"branch page points to itself", func(t *testing.T, dir string) {
			pid := make([]byte, 8)
			binary.NativeEndian.PutUint64(pid, branch)
			writeAt(t, dir, int64(branch)*ps+boltPageHeader+8, pid) // element 0's pgid
		}, "reached twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyStore(t, base)
			tt.damage(t, dir)
			wantCorrupt(t, dir, tt.detail)
		})
	}
}
