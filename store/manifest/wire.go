package manifest

import (
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// field is one decoded protobuf field: its number, wire type and value.
// For a varint u holds the value; for a length-delimited field b aliases the
// input. Other wire types carry no value (they are skipped).
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64
	b   []byte
}

// walk calls fn for every field of the message encoded in b, in wire order.
// path names the message in errors. Groups (wire types 3 and 4) are refused
// (§4); fixed-width fields are skipped with ConsumeFieldValue and reach fn
// without a value; mesh's resource wire types 6 and 7 are refused by it.
func walk(b []byte, path string, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireError(path, 0, n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		case protowire.StartGroupType, protowire.EndGroupType:
			return fmt.Errorf("%s: field %d: group wire type %d: %w", path, num, typ, ErrMalformed)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return wireError(path, num, n)
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// wireError converts a negative protowire length into ErrTruncated or
// ErrMalformed naming the message and field (num 0: the tag itself).
func wireError(path string, num protowire.Number, n int) error {
	where := "tag"
	if num != 0 {
		where = fmt.Sprintf("field %d", num)
	}
	err := protowire.ParseError(n)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: %s: %w", path, where, ErrTruncated)
	}
	return fmt.Errorf("%s: %s: %v: %w", path, where, err, ErrMalformed)
}

func (f field) wrongType(path, name string, want protowire.Type) error {
	return fmt.Errorf("%s.%s: wire type %s, want %s: %w", path, name, typeName(f.typ), typeName(want), ErrMalformed)
}

func typeName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.BytesType:
		return "bytes"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	}
	return fmt.Sprint(int8(t))
}

// varint returns a varint field's value. Callers narrow it; narrowing
// truncates, as the Rust decoder does (§4).
func (f field) varint(path, name string) (uint64, error) {
	if f.typ != protowire.VarintType {
		return 0, f.wrongType(path, name, protowire.VarintType)
	}
	return f.u, nil
}

func (f field) u32(path, name string) (uint32, error) {
	v, err := f.varint(path, name)
	return uint32(v), err
}

func (f field) boolean(path, name string) (bool, error) {
	v, err := f.varint(path, name)
	return v != 0, err
}

// payload returns a length-delimited field's value, refusing more than limit
// bytes. The result aliases the input.
func (f field) payload(path, name string, limit int) ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, f.wrongType(path, name, protowire.BytesType)
	}
	if len(f.b) > limit {
		return nil, fmt.Errorf("%s.%s: %d bytes exceed the limit of %d: %w", path, name, len(f.b), limit, ErrFieldTooLarge)
	}
	return f.b, nil
}

// bytes returns a copy of a bytes field; empty decodes as nil.
func (f field) bytes(path, name string, limit int) ([]byte, error) {
	b, err := f.payload(path, name, limit)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// str returns a string field, which must be valid UTF-8 (§4).
func (f field) str(path, name string, limit int) (string, error) {
	b, err := f.payload(path, name, limit)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s.%s: invalid UTF-8: %w", path, name, ErrMalformed)
	}
	return string(b), nil
}

// appendString decodes one element of a repeated string field, refusing it
// when dst already holds count elements.
func (f field) appendString(dst []string, path, name string, count, limit int) ([]string, error) {
	if len(dst) >= count {
		return dst, tooMany(path, name, count)
	}
	s, err := f.str(path, name, limit)
	if err != nil {
		return dst, err
	}
	return append(dst, s), nil
}

// appendUint32s decodes a repeated u32 field in either packed or unpacked
// form (§4), refusing the element that would exceed count.
func (f field) appendUint32s(dst []uint32, path, name string, count int) ([]uint32, error) {
	switch f.typ {
	case protowire.VarintType:
		if len(dst) >= count {
			return dst, tooMany(path, name, count)
		}
		return append(dst, uint32(f.u)), nil
	case protowire.BytesType:
		for b := f.b; len(b) > 0; {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return dst, wireError(path+"."+name, f.num, n)
			}
			if len(dst) >= count {
				return dst, tooMany(path, name, count)
			}
			dst = append(dst, uint32(v))
			b = b[n:]
		}
		return dst, nil
	default:
		return dst, f.wrongType(path, name, protowire.BytesType)
	}
}

// message returns the encoding of a message field.
func (f field) message(path, name string) ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, f.wrongType(path, name, protowire.BytesType)
	}
	return f.b, nil
}

func tooMany(path, name string, count int) error {
	return fmt.Errorf("%s.%s: more than %d elements: %w", path, name, count, ErrTooMany)
}
