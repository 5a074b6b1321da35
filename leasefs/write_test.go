package leasefs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"templatefs/store"
)

func TestParseLeaseWrite(t *testing.T) {
	tests := []struct {
		in   string
		want leaseCommand
		ok   bool
	}{
		{"kill", leaseCommand{kill: true}, true},
		{"cancel", leaseCommand{cancel: true}, true},
		{"cancel ", leaseCommand{}, false},
		{"Cancel", leaseCommand{}, false},
		{"cancel kill", leaseCommand{}, false},
		{"kill\n", leaseCommand{}, false},
		{"pid 1", leaseCommand{pid: 1}, true},
		{"pid 123", leaseCommand{pid: 123}, true},
		{"pid 2147483647", leaseCommand{pid: MaxPID}, true},
		{"", leaseCommand{}, false},
		{"\n", leaseCommand{}, false},
		{"kill\n\n", leaseCommand{}, false},
		{"kill\r\n", leaseCommand{}, false},
		{" kill", leaseCommand{}, false},
		{"KILL", leaseCommand{}, false},
		{"killall", leaseCommand{}, false},
		{"pid", leaseCommand{}, false},
		{"pid ", leaseCommand{}, false},
		{"pid 0", leaseCommand{}, false},
		{"pid 01", leaseCommand{}, false},
		{"pid +1", leaseCommand{}, false},
		{"pid -1", leaseCommand{}, false},
		{"pid  1", leaseCommand{}, false},
		{"pid\t1", leaseCommand{}, false},
		{"pid 1 ", leaseCommand{}, false},
		{"pid 1\nkill", leaseCommand{}, false},
		{"pid 0x10", leaseCommand{}, false},
		{"pid 2147483648", leaseCommand{}, false},
		{"pid 99999999999", leaseCommand{}, false},
		{"pid 1\x00", leaseCommand{}, false},
		{"pid " + strings.Repeat("1", MaxCommandLen), leaseCommand{}, false},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := parseLeaseWrite([]byte(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parseLeaseWrite = %+v, %v; want %+v, ok %v", got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadWrite) {
				t.Errorf("error %v does not wrap ErrBadWrite", err)
			}
		})
	}
}

// TestCommandBound: a write over MaxCommandLen is refused before it is
// parsed, so the error names its length, not its content.
func TestCommandBound(t *testing.T) {
	long := []byte("kill" + strings.Repeat(" ", MaxCommandLen))
	for name, parse := range map[string]func([]byte) error{
		"lease": func(b []byte) error { _, err := parseLeaseWrite(b); return err },
		"ctl":   func(b []byte) error { _, err := parseCtlWrite(b); return err },
	} {
		err := parse(long)
		if !errors.Is(err, ErrBadWrite) || !strings.Contains(err.Error(), fmt.Sprintf("command line of %d bytes", len(long))) || strings.Contains(err.Error(), "kill") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzParseLeaseWrite: the parser never panics, refuses anything longer
// than MaxCommandLen, and accepts only the exact grammar: an accepted
// input is the canonical rendering of what it parsed to.
func FuzzParseLeaseWrite(f *testing.F) {
	for _, s := range []string{"kill", "kill\n", "pid 1\n", "pid 2147483647", "pid 2147483648", "pid 01", "pid -5", "", "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := parseLeaseWrite(data)
		if err != nil {
			if !errors.Is(err, ErrBadWrite) {
				t.Fatalf("error %v does not wrap ErrBadWrite", err)
			}
			return
		}
		if len(data) > MaxCommandLen {
			t.Fatalf("accepted %d bytes, limit %d", len(data), MaxCommandLen)
		}
		want := "kill"
		if !cmd.kill {
			if cmd.pid < 1 || cmd.pid > MaxPID {
				t.Fatalf("accepted pid %d", cmd.pid)
			}
			want = "pid " + strconv.Itoa(cmd.pid)
		}
		if s := string(data); s != want {
			t.Fatalf("accepted %q as %+v", data, cmd)
		}
	})
}

func TestParseCtlWrite(t *testing.T) {
	for _, c := range ctlCommands {
		if got, err := parseCtlWrite([]byte(c)); err != nil || got != c {
			t.Errorf("parseCtlWrite(%q) = %q, %v", c, got, err)
		}
	}
	for _, in := range []string{"", "\n", "lift\n", "Lift", "lift ", " lift", "lift\n\n", "lift\nretire", "delete", "retire\x00", strings.Repeat("lift\n", 20)} {
		if got, err := parseCtlWrite([]byte(in)); !errors.Is(err, ErrBadWrite) {
			t.Errorf("parseCtlWrite(%q) = %q, %v; want ErrBadWrite", in, got, err)
		}
	}
	if got := string(ctlText); got != "tombstone\nlift\nretire\n" {
		t.Errorf("ctl text %q", got)
	}
}

func TestRefusalsBounded(t *testing.T) {
	var r refusals
	for g := 1; g <= maxRefusals+1; g++ {
		r.note(store.GenerationID(g), "op", fmt.Errorf("reason %d\nsecond line: %w", g, ErrNotPermitted))
	}
	if len(r.last) != maxRefusals {
		t.Errorf("%d refusals kept, want %d", len(r.last), maxRefusals)
	}
	if _, ok := r.get(1); ok {
		t.Error("oldest refusal kept")
	}
	got, ok := r.get(maxRefusals + 1)
	if !ok || got.errno != EPERM || strings.Contains(got.String(), "\n") || !strings.Contains(got.String(), " op EPERM: reason 4097 second line: ") {
		t.Errorf("newest refusal %q, %v", got, ok)
	}
	r.note(2, "op", nil)
	r.note(0, "op", ErrNotPermitted)
	if _, ok := r.get(0); ok || len(r.last) != maxRefusals {
		t.Error("a nil error or generation 0 was remembered")
	}
}

// TestCommandsStream: a handle's writes are one stream of lines. A line
// split over two writes runs once, when its newline arrives; a final line
// without newline runs at Flush and only there; empty lines are skipped;
// offsets play no part (the stream has none).
func TestCommandsStream(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	h, err := fx.fs.Open(fx.walk("generations/g000001/ctl"), OpenFlags{Write: true, Truncate: true}, owner)
	if err != nil {
		t.Fatal(err)
	}
	w := h.Commands
	stateIs := func(when string, want store.GenerationState) {
		t.Helper()
		if g, err := fx.st.Generation(fx.gens[1].ID); err != nil || g.State != want {
			t.Fatalf("%s: %s, %v; want %s", when, g.State, err, want)
		}
	}
	for _, part := range []string{"\n", "tomb"} {
		if n, err := w.Write([]byte(part), owner); err != nil || n != len(part) {
			t.Fatalf("Write(%q) = %d, %v", part, n, err)
		}
	}
	stateIs("after a partial line", store.Published)
	if _, err := w.Write([]byte("stone\n\nli"), owner); err != nil {
		t.Fatal(err)
	}
	stateIs("after the line's newline", store.Tombstoned)
	if _, err := w.Write([]byte("ft"), owner); err != nil {
		t.Fatal(err)
	}
	stateIs("before close", store.Tombstoned)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	stateIs("after close", store.Published)

	// cancel at close runs once: a second close has nothing left to run
	// (running it again would find the lease gone, ENOENT).
	lh, err := fx.fs.Open(fx.walk("leases/c1"), OpenFlags{Write: true}, owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lh.Commands.Write([]byte("cancel"), owner); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.st.Lease("c1"); err != nil {
		t.Fatalf("lease gone before close: %v", err)
	}
	for i := range 2 {
		if err := lh.Commands.Flush(); err != nil {
			t.Fatalf("flush %d: %v", i+1, err)
		}
	}
	if err := noLease("c1")(fx); err != nil {
		t.Error(err)
	}
}
