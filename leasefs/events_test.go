package leasefs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"templatefs/store"
)

// hang bounds every wait of these tests; it only catches hangs.
const hang = 30 * time.Second

// eventLine is one line of the events file as a client decodes it.
type eventLine struct {
	Seq        uint64             `json:"seq"`
	At         time.Time          `json:"at"`
	Kind       string             `json:"event"`
	Generation store.GenerationID `json:"generation"`
	KeyID      string             `json:"key_id"`
	CloneID    string             `json:"clone_id"`
	LeaseSeq   uint64             `json:"lease_seq"`
	Missed     uint64             `json:"missed"`
}

// openEventsFile opens the events file as a reader would.
func (fx *fixture) openEventsFile() *Events {
	fx.t.Helper()
	h, err := fx.fs.Open(fx.walk("events"), OpenFlags{}, other)
	if err != nil || h.Events == nil {
		fx.t.Fatalf("open events: %v (handle %+v)", err, h)
	}
	fx.t.Cleanup(h.Events.Close)
	return h.Events
}

// readLines reads from ev until it has n lines, with reads of size
// bufSize, checking that every read returns whole lines when bufSize
// holds one.
func readLines(t *testing.T, ev *Events, n, bufSize int) []eventLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	var all []byte
	buf := make([]byte, bufSize)
	for bytes.Count(all, []byte("\n")) < n {
		got, err := ev.Read(ctx, buf)
		if err != nil {
			t.Fatalf("read after %d lines: %v", bytes.Count(all, []byte("\n")), err)
		}
		if bufSize >= 512 && (got == 0 || buf[got-1] != '\n') {
			t.Fatalf("read of %d bytes ends inside a line: %q", got, buf[:got])
		}
		all = append(all, buf[:got]...)
	}
	var out []eventLine
	sc := bufio.NewScanner(bytes.NewReader(all))
	for sc.Scan() {
		var l eventLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		out = append(out, l)
	}
	if len(out) != n {
		t.Fatalf("read %d lines, want %d:\n%s", len(out), n, all)
	}
	return out
}

// TestEvents: an open sees, in order and with consecutive sequence
// numbers, every state change made after it, with the change's fields;
// an open made later sees only the later ones; reads return whole lines
// (or, with a buffer smaller than a line, the line in pieces).
func TestEvents(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	first := fx.openEventsFile()
	g1, g3 := fx.gens[1], fx.gens[3]

	gl, name := fx.parent("generations/g000003/leases/e1")
	if err := createClosed(fx.fs, gl, name, true, owner); err != nil {
		t.Fatal(err)
	}
	if err := fx.fs.Rename(fx.walk("generations"), "g000003", fx.walk("tombstones"), "g000003", 0, owner); err != nil {
		t.Fatal(err)
	}
	second := fx.openEventsFile() // after the tombstone
	if err := fx.fs.Rename(fx.walk("tombstones"), "g000003", fx.walk("generations"), "g000003", 0, owner); err != nil {
		t.Fatal(err)
	}
	if err := fx.fs.Rename(fx.walk("generations"), "g000001", fx.walk("tombstones"), "g000001", 0, owner); err != nil {
		t.Fatal(err)
	}
	if err := fx.fs.Rmdir(fx.walk("tombstones"), "g000001", owner); err != nil {
		t.Fatal(err)
	}

	type want struct {
		kind  store.EventKind
		gen   store.GenerationID
		clone string
	}
	all := []want{
		{store.EventLeaseCreated, g3.ID, "e1"},
		{store.EventTombstoned, g3.ID, ""},
		{store.EventLifted, g3.ID, ""},
		{store.EventTombstoned, g1.ID, ""},
		{store.EventRetirementStarted, g1.ID, ""}, // c1 holds it
	}
	check := func(t *testing.T, got []eventLine, want []want) {
		t.Helper()
		for i, l := range got {
			w := want[i]
			if l.Kind != string(w.kind) || l.Generation != w.gen || l.CloneID != w.clone || l.KeyID != g1.KeyID {
				t.Errorf("line %d: %+v, want %+v", i, l, w)
			}
			if i > 0 && l.Seq != got[i-1].Seq+1 {
				t.Errorf("line %d: seq %d after %d", i, l.Seq, got[i-1].Seq)
			}
			if l.At.IsZero() || i > 0 && l.At.Before(got[i-1].At) {
				t.Errorf("line %d: time %v", i, l.At)
			}
		}
	}
	t.Run("from the open", func(t *testing.T) { check(t, readLines(t, first, len(all), 64<<10), all) })
	t.Run("opened later", func(t *testing.T) { check(t, readLines(t, second, len(all)-2, 7), all[2:]) })
}

// TestEventsMissed: a reader that falls more than store.EventBuffer
// events behind gets one line with the exact number it missed, then the
// newest EventBuffer events; nothing is lost before that bound.
func TestEventsMissed(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	behind := fx.openEventsFile()
	g := fx.gens[3].ID
	const over = 5
	changes := store.EventBuffer + over
	for i := 0; i < changes; i += 2 {
		if _, err := fx.st.Tombstone(g, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.st.Lift(g); err != nil {
			t.Fatal(err)
		}
	}
	made := changes + changes%2 // whole pairs
	lines := readLines(t, behind, 1+store.EventBuffer, 64<<10)
	if l := lines[0]; l.Kind != "missed" || l.Missed != uint64(made-store.EventBuffer) {
		t.Fatalf("first line %+v, want missed %d", l, made-store.EventBuffer)
	}
	for i, l := range lines[1:] {
		if want := lines[1].Seq + uint64(i); l.Seq != want {
			t.Fatalf("line %d: seq %d, want %d", i+1, l.Seq, want)
		}
	}
	if last := lines[len(lines)-1]; last.Seq-lines[1].Seq+1 != store.EventBuffer || last.Kind != string(store.EventLifted) {
		t.Fatalf("kept %d events ending with %+v, want %d ending with lifted", last.Seq-lines[1].Seq+1, last, store.EventBuffer)
	}
}

// TestEventsEnd: a blocked read returns on ctx's end (EINTR on the
// mount), and then, like every later read and open, EOF after EndEvents
// or a closed store.
func TestEventsEnd(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	ev := fx.openEventsFile()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := ev.Read(ctx, make([]byte, 4096)); !errors.Is(err, context.Canceled) || ToErrno(err) != EINTR {
		t.Fatalf("interrupted read: %v (%v), want context.Canceled (EINTR)", err, ToErrno(err))
	}
	done := make(chan error, 1)
	go func() {
		_, err := ev.Read(context.Background(), make([]byte, 4096))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	fx.fs.EndEvents()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("read after EndEvents: %v, want EOF", err)
		}
	case <-time.After(hang):
		t.Fatal("read still blocked after EndEvents")
	}
	if _, err := fx.openEventsFile().Read(context.Background(), make([]byte, 10)); err != io.EOF {
		t.Fatalf("read of an open after EndEvents: %v, want EOF", err)
	}

	fx.reopen() // a new FS; closing the store ends its streams
	ev = fx.openEventsFile()
	go func() {
		_, err := ev.Read(context.Background(), make([]byte, 4096))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	fx.st.Close()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("read after the store closed: %v, want EOF", err)
		}
	case <-time.After(hang):
		t.Fatal("read still blocked after the store closed")
	}
	if _, err := fx.openEventsFile().Read(context.Background(), make([]byte, 10)); err != io.EOF {
		t.Fatalf("read of an open after the store closed: %v, want EOF", err)
	}
}

// TestEventsReadOnly: the events file takes no write-open: EACCES for
// other users, EROFS for the owner.
func TestEventsReadOnly(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	n := fx.walk("events")
	if _, err := fx.fs.Open(n, OpenFlags{Write: true}, other); ToErrno(err) != EACCES {
		t.Errorf("write-open by another user: %v", err)
	}
	if _, err := fx.fs.Open(n, OpenFlags{Write: true}, owner); ToErrno(err) != EROFS {
		t.Errorf("write-open by the owner: %v", err)
	}
	a, err := fx.fs.Attr(n)
	if err != nil || a.Size != 0 || a.Mode != modeText || a.Ino != InoEvents {
		t.Errorf("attr %+v, %v", a, err)
	}
}
