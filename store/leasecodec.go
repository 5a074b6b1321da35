package store

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// A lease row (schema version 2) is the lease's clone ID as its key and
// this value, which omits the clone ID:
//
//	format   byte     leaseFormat
//	state    byte     leaseStateCodes
//	fields   byte     which optional parts follow (leaseHas*)
//	gen      uvarint  Generation
//	seq      uvarint  Seq
//	key ID   32 bytes when leaseHasHexKey (64 lowercase hex digits), else a string
//	launch   16 bytes when leaseHasHexLaunch (32 lowercase hex digits), else a string
//	created  time
//	[process] pid uvarint, pidfs inode uvarint, start time uvarint,
//	          boot ID 16 bytes when leaseHasHexBoot, else a string
//	[bound at] [updated at] [exited at]  time each
//	[exit] [check error]                 string each
//
// A string is a uvarint length and its bytes; a time is a varint of Unix
// seconds and a uvarint of nanoseconds (< 1e9), read back in UTC; the
// zero time is written as no time (its bit clear). A Reserved lease on
// a 64-digit key takes about 65 bytes against about 230 as JSON.
const leaseFormat byte = 1

// leaseStateCodes are the state bytes; 0 is no state.
var leaseStateCodes = [...]LeaseState{1: Reserved, 2: Bound, 3: Releasing, 4: TeardownFailed, 5: Exited}

// Bits of a lease row's fields byte.
const (
	leaseHasHexKey byte = 1 << iota
	leaseHasHexLaunch
	leaseHasProcess
	leaseHasHexBoot
	leaseHasBoundAt
	leaseHasUpdatedAt
	leaseHasExitedAt
	leaseHasText // exit and check error follow (either may be empty)
)

// errLeaseRow is wrapped by every decodeLease error.
var errLeaseRow = errors.New("malformed lease row")

// encodeLease returns l's row value. An unknown state is an error: it
// has no code.
func encodeLease(l Lease) ([]byte, error) {
	code := leaseStateCode(l.State)
	if code == 0 {
		return nil, fmt.Errorf("lease %q: state %q has no row code", l.CloneID, l.State)
	}
	key, hexKey := hexBytes(l.KeyID, 32)
	launch, hexLaunch := hexBytes(l.LaunchID, 16)
	var fields byte
	fields |= bit(hexKey, leaseHasHexKey) | bit(hexLaunch, leaseHasHexLaunch)
	fields |= bit(l.Process != nil, leaseHasProcess)
	var boot []byte
	hexBoot := false
	if l.Process != nil {
		boot, hexBoot = hexBytes(l.Process.BootID, 16)
		fields |= bit(hexBoot, leaseHasHexBoot)
	}
	fields |= bit(!l.BoundAt.IsZero(), leaseHasBoundAt) | bit(!l.UpdatedAt.IsZero(), leaseHasUpdatedAt) | bit(!l.ExitedAt.IsZero(), leaseHasExitedAt)
	fields |= bit(l.Exit != "" || l.CheckError != "", leaseHasText)

	b := make([]byte, 0, 80)
	b = append(b, leaseFormat, code, fields)
	b = binary.AppendUvarint(b, uint64(l.Generation))
	b = binary.AppendUvarint(b, l.Seq)
	b = appendHexOrString(b, key, hexKey, l.KeyID)
	b = appendHexOrString(b, launch, hexLaunch, l.LaunchID)
	b = appendTime(b, l.CreatedAt)
	if p := l.Process; p != nil {
		if p.PID < 0 {
			return nil, fmt.Errorf("lease %q: process ID %d is negative", l.CloneID, p.PID)
		}
		b = binary.AppendUvarint(b, uint64(p.PID))
		b = binary.AppendUvarint(b, p.PidfsIno)
		b = binary.AppendUvarint(b, p.StartTime)
		b = appendHexOrString(b, boot, hexBoot, p.BootID)
	}
	for _, t := range []time.Time{l.BoundAt, l.UpdatedAt, l.ExitedAt} {
		if !t.IsZero() {
			b = appendTime(b, t)
		}
	}
	if fields&leaseHasText != 0 {
		b = appendString(b, l.Exit)
		b = appendString(b, l.CheckError)
	}
	return b, nil
}

// decodeLease decodes the row of clone cloneID. Any row encodeLease did
// not write fails with errLeaseRow, naming what is wrong; it never panics.
func decodeLease(cloneID, row []byte) (Lease, error) {
	d := rowDecoder{b: row}
	format, code, fields := d.byte(), d.byte(), d.byte()
	if d.err != nil {
		return Lease{}, d.err
	}
	if format != leaseFormat {
		return Lease{}, fmt.Errorf("%w: format %d, this build reads %d", errLeaseRow, format, leaseFormat)
	}
	if int(code) >= len(leaseStateCodes) || code == 0 {
		return Lease{}, fmt.Errorf("%w: state code %d", errLeaseRow, code)
	}
	l := Lease{CloneID: string(cloneID), State: leaseStateCodes[code]}
	l.Generation = GenerationID(d.uvarint())
	l.Seq = d.uvarint()
	l.KeyID = d.hexOrString(fields&leaseHasHexKey != 0, 32)
	l.LaunchID = d.hexOrString(fields&leaseHasHexLaunch != 0, 16)
	l.CreatedAt = d.time()
	if fields&leaseHasProcess != 0 {
		pid := d.uvarint()
		if pid > 1<<31-1 {
			d.fail("process ID %d out of range", pid)
		}
		l.Process = &ProcessIdentity{PID: int(pid), PidfsIno: d.uvarint(), StartTime: d.uvarint()}
		l.Process.BootID = d.hexOrString(fields&leaseHasHexBoot != 0, 16)
	} else if fields&leaseHasHexBoot != 0 {
		d.fail("boot ID bit without a process")
	}
	for _, f := range []struct {
		bit byte
		t   *time.Time
	}{{leaseHasBoundAt, &l.BoundAt}, {leaseHasUpdatedAt, &l.UpdatedAt}, {leaseHasExitedAt, &l.ExitedAt}} {
		if fields&f.bit != 0 {
			*f.t = d.time()
		}
	}
	if fields&leaseHasText != 0 {
		l.Exit, l.CheckError = d.string(), d.string()
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the last field", len(d.b))
	}
	if d.err != nil {
		return Lease{}, d.err
	}
	return l, nil
}

func leaseStateCode(s LeaseState) byte {
	for i, c := range leaseStateCodes {
		if i > 0 && c == s {
			return byte(i)
		}
	}
	return 0
}

func bit(set bool, b byte) byte {
	if set {
		return b
	}
	return 0
}

// hexBytes decodes s when it is exactly n bytes as lowercase hex.
func hexBytes(s string, n int) ([]byte, bool) {
	if len(s) != 2*n {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	if err != nil || hex.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

func appendHexOrString(b, raw []byte, isHex bool, s string) []byte {
	if isHex {
		return append(b, raw...)
	}
	return appendString(b, s)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendTime(b []byte, t time.Time) []byte {
	return binary.AppendUvarint(binary.AppendVarint(b, t.Unix()), uint64(t.Nanosecond()))
}

// rowDecoder reads a row front to back; the first error sticks and
// every later read returns zero values.
type rowDecoder struct {
	b   []byte
	err error
}

func (d *rowDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errLeaseRow, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *rowDecoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("needs %d more bytes, has %d", n, len(d.b))
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *rowDecoder) byte() byte {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *rowDecoder) uvarint() uint64 { return readVarint(d, binary.Uvarint, "unsigned varint") }

func (d *rowDecoder) varint() int64 { return readVarint(d, binary.Varint, "varint") }

// readVarint reads one varint from d with read (binary.Uvarint or
// binary.Varint), named what in the error.
func readVarint[T uint64 | int64](d *rowDecoder, read func([]byte) (T, int), what string) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.fail("bad %s", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *rowDecoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string of %d bytes, %d left", n, len(d.b))
		return ""
	}
	return string(d.take(int(n)))
}

func (d *rowDecoder) hexOrString(isHex bool, n int) string {
	if !isHex {
		return d.string()
	}
	return hex.EncodeToString(d.take(n))
}

func (d *rowDecoder) time() time.Time {
	sec, nsec := d.varint(), d.uvarint()
	if nsec >= 1e9 {
		d.fail("nanoseconds %d out of range", nsec)
	}
	if d.err != nil {
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}
