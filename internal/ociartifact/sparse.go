package ociartifact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"templatefs/internal/sparsefile"
)

// The sparse encoding of one artifact: the layer blob that carries a
// file of logical length Size in the cost of its data. All integers are
// big-endian.
//
//	header  magic "TFSPARS1" (8 bytes) | flags u32 (0) | reserved u32 (0)
//	        | size u64 (the file's logical length) | count u64 (extents)
//	map     count × (offset u64 | length u64): the data extents, in
//	        increasing offset order, each non-empty, not touching the
//	        next (a gap of at least one byte), ending at or before size
//	data    the bytes of every extent, in map order, nothing else
//
// Everything outside the extents reads as zero. The map comes first so
// that a pull writes each extent where it belongs as the blob streams in,
// with no buffering; the blob's OCI digest covers header, map and data,
// and the artifact's SHA-256 (over all Size bytes, holes as zeros) is
// checked again when the pulled file is published.
const (
	sparseMagic = "TFSPARS1"
	headerSize  = 32
	extentSize  = 16
)

// MaxExtents is the most extents an encoded artifact may list: 64 MiB of
// map. Encode never needs more for a file below 256 TiB (it folds gaps
// shorter than MinHole into the data); Decode refuses more before it
// allocates for them.
const MaxExtents = 1 << 22

// MinHole is the shortest gap (a hole, or a run of zero pages) that
// Encode leaves out: shorter ones are sent as data, which bounds the map
// at one extent per MinHole of logical size.
const MinHole = 64 << 10

// pageSize is the granularity at which Encode finds zero runs inside data
// extents and Decode skips writing zero pages.
const pageSize = 4096

// Extent is one data extent of an artifact.
type Extent struct {
	Offset, Length int64
}

// ErrEncoding is returned (wrapped, with what is wrong) for an encoded
// artifact that is not well formed or does not match what the generation
// records.
var ErrEncoding = errors.New("malformed sparse artifact")

// Sparse is the encoding of one file: its logical size and data extents.
type Sparse struct {
	Size    int64
	Extents []Extent
}

// Scan finds the data of the first size bytes of f: the extents
// SEEK_DATA/SEEK_HOLE report (the whole file where the system has no
// such seeks), less the runs of zero pages inside them, with gaps shorter
// than MinHole folded into the data. It reads every data byte once.
func Scan(f *os.File, size int64) (Sparse, error) {
	sp := Sparse{Size: size}
	buf := make([]byte, 1<<20)
	add := func(off, end int64) {
		if n := len(sp.Extents); n > 0 {
			last := &sp.Extents[n-1]
			if off-(last.Offset+last.Length) < MinHole {
				last.Length = end - last.Offset
				return
			}
		}
		sp.Extents = append(sp.Extents, Extent{off, end - off})
	}
	for off := int64(0); off < size; {
		data, hole := sparsefile.NextExtent(f, off, size)
		for p := data; p < hole; {
			n := int(min(int64(len(buf)), hole-p))
			if _, err := f.ReadAt(buf[:n], p); err != nil {
				if errors.Is(err, io.EOF) {
					return Sparse{}, fmt.Errorf("%s is shorter than %d bytes", f.Name(), size)
				}
				return Sparse{}, err
			}
			for i := 0; i < n; i += pageSize {
				page := buf[i:min(i+pageSize, n)]
				if !allZero(page) {
					add(p+int64(i), p+int64(i+len(page)))
				}
			}
			p += int64(n)
		}
		off = hole
	}
	return sp, nil
}

// DataLen is the number of data bytes: the sum of the extents' lengths.
func (sp Sparse) DataLen() int64 {
	var n int64
	for _, e := range sp.Extents {
		n += e.Length
	}
	return n
}

// EncodedLen is the length of the encoded blob.
func (sp Sparse) EncodedLen() int64 {
	return headerSize + int64(len(sp.Extents))*extentSize + sp.DataLen()
}

// header returns the header and map.
func (sp Sparse) header() []byte {
	b := make([]byte, 0, headerSize+len(sp.Extents)*extentSize)
	b = append(b, sparseMagic...)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(sp.Size))
	b = binary.BigEndian.AppendUint64(b, uint64(len(sp.Extents)))
	for _, e := range sp.Extents {
		b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Length))
	}
	return b
}

// WriteTo writes the encoding of f, whose data sp describes (Scan), to w.
// It fails if f is shorter than an extent.
func (sp Sparse) WriteTo(w io.Writer, f *os.File) (int64, error) {
	n, err := w.Write(sp.header())
	written := int64(n)
	if err != nil {
		return written, err
	}
	for _, e := range sp.Extents {
		m, err := io.Copy(w, io.NewSectionReader(f, e.Offset, e.Length))
		written += m
		if err != nil {
			return written, err
		}
		if m != e.Length {
			return written, fmt.Errorf("%s is shorter than its extent at %d", f.Name(), e.Offset)
		}
	}
	return written, nil
}

// DecodeHeader reads the header and map from r and checks them against
// the logical size the generation records: the magic, no flags, that
// size, at most MaxExtents extents, each non-empty, in order, apart and
// inside the file. It reads exactly the header and map, allocating as
// extents arrive (a count larger than r holds costs nothing).
func DecodeHeader(r io.Reader, size int64) (Sparse, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Sparse{}, fmt.Errorf("%w: header: %w", ErrEncoding, shortRead(err))
	}
	if string(h[:8]) != sparseMagic {
		return Sparse{}, fmt.Errorf("%w: magic %q, want %q", ErrEncoding, h[:8], sparseMagic)
	}
	if flags, reserved := binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:]); flags != 0 || reserved != 0 {
		return Sparse{}, fmt.Errorf("%w: flags %#x and reserved %#x, want 0", ErrEncoding, flags, reserved)
	}
	if got := binary.BigEndian.Uint64(h[16:]); got != uint64(size) {
		return Sparse{}, fmt.Errorf("%w: logical size %d, the generation records %d", ErrEncoding, got, size)
	}
	count := binary.BigEndian.Uint64(h[24:])
	if count > MaxExtents {
		return Sparse{}, fmt.Errorf("%w: %d extents, at most %d", ErrEncoding, count, MaxExtents)
	}
	sp := Sparse{Size: size}
	end := int64(-1) // the end of the previous extent; -1 lets the first start at 0
	var e [extentSize]byte
	for i := uint64(0); i < count; i++ {
		if _, err := io.ReadFull(r, e[:]); err != nil {
			return Sparse{}, fmt.Errorf("%w: extent %d of %d: %w", ErrEncoding, i, count, shortRead(err))
		}
		off, length := binary.BigEndian.Uint64(e[:8]), binary.BigEndian.Uint64(e[8:])
		switch {
		case length == 0:
			return Sparse{}, fmt.Errorf("%w: extent %d at %d is empty", ErrEncoding, i, off)
		case off > uint64(size) || length > uint64(size)-off:
			return Sparse{}, fmt.Errorf("%w: extent %d (%d bytes at %d) ends past the logical size %d", ErrEncoding, i, length, off, size)
		case int64(off) <= end:
			return Sparse{}, fmt.Errorf("%w: extent %d at %d does not start after the previous one's end %d", ErrEncoding, i, off, end)
		}
		sp.Extents = append(sp.Extents, Extent{int64(off), int64(length)})
		end = int64(off + length)
	}
	return sp, nil
}

// WriteData reads the data section from r into dst at each extent's
// offset, after truncating dst to the logical size (so everything else is
// a hole). All-zero pages are not written: they stay holes. It reads
// exactly DataLen bytes; the caller checks that the blob ends there (its
// digest and size). progress, if not nil, is told each block's length.
func (sp Sparse) WriteData(r io.Reader, dst io.WriterAt, truncate func(int64) error, progress func(n int64) error) error {
	if err := truncate(sp.Size); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i, e := range sp.Extents {
		for p := e.Offset; p < e.Offset+e.Length; {
			n := int(min(int64(len(buf)), e.Offset+e.Length-p))
			if _, err := io.ReadFull(r, buf[:n]); err != nil {
				return fmt.Errorf("%w: data of extent %d: %w", ErrEncoding, i, shortRead(err))
			}
			if err := writeNonZero(dst, buf[:n], p); err != nil {
				return err
			}
			if progress != nil {
				if err := progress(int64(n)); err != nil {
					return err
				}
			}
			p += int64(n)
		}
	}
	return nil
}

// writeNonZero writes b to dst at off, but for its all-zero pages: each
// run of pages that are not all zero in one write.
func writeNonZero(dst io.WriterAt, b []byte, off int64) error {
	start := -1 // the first page of the current run, or -1
	flush := func(end int) error {
		if start < 0 {
			return nil
		}
		_, err := dst.WriteAt(b[start:end], off+int64(start))
		start = -1
		return err
	}
	for j := 0; j < len(b); j += pageSize {
		if !allZero(b[j:min(j+pageSize, len(b))]) {
			if start < 0 {
				start = j
			}
		} else if err := flush(j); err != nil {
			return err
		}
	}
	return flush(len(b))
}

// shortRead names an early end of the blob.
func shortRead(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the blob ends early (the connection was cut, or the registry holds it truncated)")
	}
	return err
}

var zeroPage = make([]byte, pageSize)

func allZero(b []byte) bool { return bytes.Equal(b, zeroPage[:len(b)]) }
