package store

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// codecLeases are leases of every state and shape a row holds: hex and
// non-hex IDs, a process with and without a hex boot ID, every optional
// time and text. Their fixed times never meet the real clock: they only go
// through encodeLease and decodeLease, which compare no time; no store is
// opened with them and no lease is bound or checked for eligibility.
func codecLeases() []Lease {
	at := time.Date(2026, 12, 2, 5, 51, 32, 267123456, time.UTC)
	key := strings.Repeat("ab", 32)
	launch := strings.Repeat("0f", 16)
	boot := strings.Repeat("9c", 16)
	return []Lease{
		{CloneID: "clone-0000001", Generation: 1, KeyID: key, Seq: 1, LaunchID: launch, CreatedAt: at, State: Reserved},
		{CloneID: "c", Generation: 1<<63 + 5, KeyID: "not-hex", Seq: 1<<64 - 1, LaunchID: "", State: Reserved},
		{CloneID: "b", Generation: 7, KeyID: key, Seq: 9, LaunchID: launch, CreatedAt: at, State: Bound,
			Process: &ProcessIdentity{PID: 1<<31 - 1, PidfsIno: 1 << 40, StartTime: 12345, BootID: boot}, BoundAt: at.Add(time.Second), UpdatedAt: at.Add(time.Second)},
		{CloneID: "r", Generation: 7, KeyID: strings.ToUpper(key), Seq: 10, LaunchID: launch, CreatedAt: at, State: Releasing,
			Process: &ProcessIdentity{PID: 3, BootID: "b"}, BoundAt: at, UpdatedAt: at, CheckError: `check pid 3: "state":"bound"`},
		{CloneID: "t", Generation: 7, KeyID: key, Seq: 11, LaunchID: launch, CreatedAt: at.Add(-87600 * time.Hour), State: TeardownFailed,
			Process: &ProcessIdentity{PID: 4, BootID: boot}, BoundAt: at, UpdatedAt: at},
		{CloneID: "x", Generation: 7, KeyID: key, Seq: 12, LaunchID: launch, CreatedAt: time.Date(9999, 1, 1, 0, 0, 0, 999999999, time.UTC), State: Exited,
			Process: &ProcessIdentity{PID: 5, BootID: boot}, BoundAt: at, UpdatedAt: at, ExitedAt: at, Exit: "pid-reused"},
	}
}

// TestLeaseRowRoundTrip decodes every encoded lease back to itself.
func TestLeaseRowRoundTrip(t *testing.T) {
	for _, l := range codecLeases() {
		row, err := encodeLease(l)
		if err != nil {
			t.Fatalf("encode %+v: %v", l, err)
		}
		got, err := decodeLease([]byte(l.CloneID), row)
		if err != nil {
			t.Fatalf("decode %q (%x): %v", l.CloneID, row, err)
		}
		if !reflect.DeepEqual(got, l) {
			t.Errorf("round trip of %q:\n got %+v\nwant %+v", l.CloneID, got, l)
		}
	}
	if row, _ := encodeLease(codecLeases()[0]); len(row) > 70 {
		t.Errorf("a reserved lease takes %d bytes, want at most 70", len(row))
	}
}

// TestLeaseRowRefusals: an unknown state does not encode; every
// truncation of a row, and a row with bytes after its last field, does
// not decode, with errLeaseRow.
func TestLeaseRowRefusals(t *testing.T) {
	if _, err := encodeLease(Lease{CloneID: "c", State: "gone"}); err == nil {
		t.Error("encoded a lease of an unknown state")
	}
	if _, err := encodeLease(Lease{CloneID: "c", State: Bound, Process: &ProcessIdentity{PID: -1}}); err == nil {
		t.Error("encoded a negative process ID")
	}
	for _, l := range codecLeases() {
		row, err := encodeLease(l)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(row) {
			if _, err := decodeLease([]byte(l.CloneID), row[:n]); !errors.Is(err, errLeaseRow) {
				t.Errorf("%q cut to %d of %d bytes: err %v, want errLeaseRow", l.CloneID, n, len(row), err)
			}
		}
		if _, err := decodeLease([]byte(l.CloneID), append(bytes.Clone(row), 0)); !errors.Is(err, errLeaseRow) {
			t.Errorf("%q with a trailing byte: err %v, want errLeaseRow", l.CloneID, err)
		}
	}
	for _, row := range [][]byte{nil, {}, {leaseFormat}, {leaseFormat, 0, 0}, {leaseFormat, 6, 0}, {2, 1, 0}, []byte(`{"state":"bound"}`)} {
		if _, err := decodeLease([]byte("c"), row); !errors.Is(err, errLeaseRow) {
			t.Errorf("decode %x: err %v, want errLeaseRow", row, err)
		}
	}
}

// FuzzDecodeLease: decoding any bytes never panics, and a row that
// decodes encodes back to the same bytes unless it spelled something in
// a longer form than encodeLease writes (a non-minimal varint, a hex ID
// as a string), in which case it must still decode to the same lease.
// Seed corpus: the encoded codecLeases and testdata/fuzz/FuzzDecodeLease.
func FuzzDecodeLease(f *testing.F) {
	for _, l := range codecLeases() {
		row, err := encodeLease(l)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(row)
	}
	f.Fuzz(func(t *testing.T, row []byte) {
		l, err := decodeLease([]byte("clone"), row)
		if err != nil {
			if !errors.Is(err, errLeaseRow) {
				t.Fatalf("decode %x: error %v is not errLeaseRow", row, err)
			}
			return
		}
		again, err := encodeLease(l)
		if err != nil {
			t.Fatalf("decoded %x to %+v, which does not encode: %v", row, l, err)
		}
		back, err := decodeLease([]byte("clone"), again)
		if err != nil || !reflect.DeepEqual(back, l) {
			t.Fatalf("%x decodes to %+v; re-encoded %x decodes to %+v, %v", row, l, again, back, err)
		}
	})
}
