package ociartifact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// sparseFile writes a file of size bytes with data at the given offsets
// (each run of n random bytes) and holes elsewhere.
func sparseFile(t *testing.T, size int64, runs map[int64]int) (*os.File, []byte) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "memory.bin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for off, n := range runs {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(255) + 1)
		}
		copy(want[off:], b)
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	return f, want
}

// memFile is a Destination in memory that refuses writes past its size.
type memFile struct{ b []byte }

func (m *memFile) Truncate(size int64) error {
	if size > 64<<20 {
		return fmt.Errorf("size %d too large for a test", size)
	}
	m.b = make([]byte, size)
	return nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, fmt.Errorf("write of %d bytes at %d outside %d", len(p), off, len(m.b))
	}
	return copy(m.b[off:], p), nil
}

// TestSparseRoundTrip: Scan finds the data (zero pages inside a data run
// are left out, gaps under MinHole folded in), the encoding carries only
// that, and decoding it gives the same bytes with holes where the zeros
// were.
func TestSparseRoundTrip(t *testing.T) {
	const size = 64 << 20
	f, want := sparseFile(t, size, map[int64]int{
		0:                  5000,         // a partial page at the start
		1 << 20:            3 * pageSize, // and a run a small gap later, folded into the previous
		1<<20 + 5*pageSize: pageSize,
		32 << 20:           1 << 20,
		size - 100:         100, // the tail, not page-aligned
	})
	// Zero pages inside a data extent are left out too.
	if _, err := f.WriteAt(make([]byte, 1<<20), 40<<20); err != nil {
		t.Fatal(err)
	}
	sp, err := Scan(f, size)
	if err != nil {
		t.Fatal(err)
	}
	wantExtents := []Extent{{0, 8192}, {1 << 20, 6 * pageSize}, {32 << 20, 1 << 20}, {size - pageSize, pageSize}}
	if fmt.Sprint(sp.Extents) != fmt.Sprint(wantExtents) {
		t.Errorf("Scan extents %v, want %v", sp.Extents, wantExtents)
	}
	var blob bytes.Buffer
	n, err := sp.WriteTo(&blob, f)
	if err != nil || n != sp.EncodedLen() || int64(blob.Len()) != n {
		t.Fatalf("WriteTo = %d, %v; blob %d bytes, EncodedLen %d", n, err, blob.Len(), sp.EncodedLen())
	}
	if sp.EncodedLen() > 2<<20 {
		t.Errorf("encoding of %d bytes with %d of data is %d bytes", size, sp.DataLen(), sp.EncodedLen())
	}
	r := bytes.NewReader(blob.Bytes())
	got, err := DecodeHeader(r, size)
	if err != nil {
		t.Fatal(err)
	}
	var dst memFile
	if err := got.WriteData(r, &dst, dst.Truncate, nil); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 {
		t.Errorf("%d bytes left after the data", r.Len())
	}
	if !bytes.Equal(dst.b, want) {
		t.Error("decoded file differs from the original")
	}
}

// TestSparseEmptyAndDense: a file of only holes encodes as a header; a
// dense file without zero pages as one extent.
func TestSparseEmptyAndDense(t *testing.T) {
	f, _ := sparseFile(t, 1<<20, nil)
	sp, err := Scan(f, 1<<20)
	if err != nil || len(sp.Extents) != 0 || sp.EncodedLen() != headerSize {
		t.Errorf("all holes: %v, %v, %d bytes", sp.Extents, err, sp.EncodedLen())
	}
	f, _ = sparseFile(t, 1<<20, map[int64]int{0: 1 << 20})
	sp, err = Scan(f, 1<<20)
	if err != nil || fmt.Sprint(sp.Extents) != fmt.Sprint([]Extent{{0, 1 << 20}}) {
		t.Errorf("dense: %v, %v", sp.Extents, err)
	}
}

// encode builds a blob by hand: a header of size and the extents, then
// data bytes.
func encode(magic string, flags uint32, size uint64, extents [][2]uint64, count uint64, data int) []byte {
	b := append([]byte(magic), make([]byte, 8)...)
	binary.BigEndian.PutUint32(b[8:], flags)
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint64(b, count)
	for _, e := range extents {
		b = binary.BigEndian.AppendUint64(b, e[0])
		b = binary.BigEndian.AppendUint64(b, e[1])
	}
	return append(b, bytes.Repeat([]byte{7}, data)...)
}

// TestDecodeRefuses: every malformed blob is ErrEncoding, naming what is
// wrong; nothing panics or allocates for a count it does not hold.
func TestDecodeRefuses(t *testing.T) {
	const size = 1 << 20
	for name, blob := range map[string][]byte{
		"empty":             nil,
		"short header":      []byte(sparseMagic),
		"magic":             encode("TFSPARS2", 0, size, nil, 0, 0),
		"flags":             encode(sparseMagic, 1, size, nil, 0, 0),
		"other size":        encode(sparseMagic, 0, size+1, nil, 0, 0),
		"too many extents":  encode(sparseMagic, 0, size, nil, MaxExtents+1, 0),
		"count beyond blob": encode(sparseMagic, 0, size, [][2]uint64{{0, 1}}, 1<<20, 0),
		"empty extent":      encode(sparseMagic, 0, size, [][2]uint64{{0, 0}}, 1, 0),
		"past the end":      encode(sparseMagic, 0, size, [][2]uint64{{size - 1, 2}}, 1, 2),
		"offset overflow":   encode(sparseMagic, 0, size, [][2]uint64{{1 << 63, 1}}, 1, 1),
		"length overflow":   encode(sparseMagic, 0, size, [][2]uint64{{1, ^uint64(0)}}, 1, 1),
		"overlapping":       encode(sparseMagic, 0, size, [][2]uint64{{0, 10}, {5, 10}}, 2, 20),
		"touching":          encode(sparseMagic, 0, size, [][2]uint64{{0, 10}, {10, 10}}, 2, 20),
		"out of order":      encode(sparseMagic, 0, size, [][2]uint64{{100, 10}, {0, 10}}, 2, 20),
		"data ends early":   encode(sparseMagic, 0, size, [][2]uint64{{0, 100}}, 1, 99),
		"second extent cut": encode(sparseMagic, 0, size, [][2]uint64{{0, 10}, {20, 10}}, 2, 15),
	} {
		r := bytes.NewReader(blob)
		sp, err := DecodeHeader(r, size)
		if err == nil {
			var dst memFile
			err = sp.WriteData(r, &dst, dst.Truncate, nil)
		}
		if !errors.Is(err, ErrEncoding) {
			t.Errorf("%s: err = %v, want ErrEncoding", name, err)
		}
	}
}

// FuzzDecode feeds arbitrary blobs to the decoder: it must refuse or
// decode, never panic, never write outside the file, and read no further
// than the header, map and data it describes.
func FuzzDecode(f *testing.F) {
	f.Add(encode(sparseMagic, 0, 4096, [][2]uint64{{0, 10}, {100, 10}}, 2, 20), uint32(4096))
	f.Add(encode(sparseMagic, 0, 0, nil, 0, 0), uint32(0))
	f.Add(encode(sparseMagic, 0, 1<<16, [][2]uint64{{1 << 15, 1 << 15}}, 1, 1<<15), uint32(1<<16))
	f.Fuzz(func(t *testing.T, blob []byte, size uint32) {
		size %= 1 << 20
		r := bytes.NewReader(blob)
		sp, err := DecodeHeader(r, int64(size))
		if err != nil {
			if !errors.Is(err, ErrEncoding) {
				t.Fatalf("DecodeHeader error %v is not ErrEncoding", err)
			}
			return
		}
		if int64(len(blob))-int64(r.Len()) != headerSize+int64(len(sp.Extents))*extentSize {
			t.Fatalf("DecodeHeader read %d bytes for %d extents", int64(len(blob))-int64(r.Len()), len(sp.Extents))
		}
		var dst memFile
		before := r.Len()
		err = sp.WriteData(io.LimitReader(r, int64(before)), &dst, dst.Truncate, nil)
		if err != nil && !errors.Is(err, ErrEncoding) {
			t.Fatalf("WriteData error %v is not ErrEncoding", err)
		}
		if err == nil && int64(before-r.Len()) != sp.DataLen() {
			t.Fatalf("WriteData read %d bytes of %d", before-r.Len(), sp.DataLen())
		}
	})
}
