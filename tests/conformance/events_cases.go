//go:build linux

package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"templatefs/store"
	"templatefs/store/templatekey"
	"templatefs/tests/harness"
)

// eventsHang bounds each wait of the events case; it only catches hangs.
const eventsHang = 30 * time.Second

// EventLine is one line of MNT/events as a client decodes it.
type EventLine struct {
	Seq        uint64    `json:"seq"`
	At         time.Time `json:"at"`
	Kind       string    `json:"event"`
	Generation string    `json:"generation"`
	CloneID    string    `json:"clone_id"`
	PID        int       `json:"pid"`
	Missed     uint64    `json:"missed"`
	Raw        string    `json:"-"`
}

// EventsReader is a real `cat MNT/events`, its stdout read line by line
// through a pipe.
type EventsReader struct {
	tb    testing.TB
	Cmd   *exec.Cmd
	lines chan string // closed at cat's EOF
	ended chan error  // cat's exit, once lines is closed
}

// StartEventsReader starts `cat path` and returns once cat holds the file
// open (its subscription exists then: the open subscribes before it
// returns). A cleanup kills and reaps it.
func StartEventsReader(tb testing.TB, path string) *EventsReader {
	tb.Helper()
	cmd := exec.Command("cat", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	r := &EventsReader{tb: tb, Cmd: cmd, lines: make(chan string, 64), ended: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
		close(r.lines)
		r.ended <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		for range r.lines {
		}
	})
	deadline := time.Now().Add(eventsHang)
	for !holdsOpen(cmd.Process.Pid, path) {
		if time.Now().After(deadline) {
			tb.Fatalf("cat %s did not open it within %v", path, eventsHang)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r
}

// holdsOpen reports whether process pid has path open.
func holdsOpen(pid int, path string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, _ := os.ReadDir(dir)
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}

// Next returns the next line, failing the test at EOF or after eventsHang.
func (r *EventsReader) Next() EventLine {
	r.tb.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			r.tb.Fatal("cat of events ended before the next line")
		}
		l := EventLine{Raw: line}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			r.tb.Fatalf("events line %q: %v", line, err)
		}
		return l
	case <-time.After(eventsHang):
		r.tb.Fatalf("no events line within %v", eventsHang)
	}
	return EventLine{}
}

// Wait waits for cat to exit after its last line, failing the test
// after eventsHang or if a line comes first.
func (r *EventsReader) Wait() error {
	r.tb.Helper()
	timeout := time.After(eventsHang)
	for {
		select {
		case line, ok := <-r.lines:
			if ok {
				r.tb.Fatalf("events line %q, want the end of cat", line)
			}
			return <-r.ended
		case <-timeout:
			r.tb.Fatalf("cat of events still running after %v", eventsHang)
		}
	}
}

// wantEvent is one line a case expects.
type wantEvent struct {
	kind  store.EventKind
	gen   string
	clone string
}

// expectEvents reads len(want) lines from r and checks their kinds,
// generations and clone IDs, and that their sequence numbers follow each
// other from the first.
func expectEvents(t *testing.T, r *EventsReader, want []wantEvent) []EventLine {
	t.Helper()
	var got []EventLine
	for i, w := range want {
		l := r.Next()
		if l.Kind != string(w.kind) || l.Generation != w.gen || l.CloneID != w.clone || l.At.IsZero() {
			t.Errorf("line %d: %s, want %s %s %s", i, l.Raw, w.kind, w.gen, w.clone)
		}
		if i > 0 && l.Seq != got[0].Seq+uint64(i) {
			t.Errorf("line %d: seq %d, want %d", i, l.Seq, got[0].Seq+uint64(i))
		}
		got = append(got, l)
	}
	return got
}

// testEvents: `cat MNT/events` (a real cat writing to a pipe) prints one
// line per state change from its open, in order with consecutive sequence
// numbers: lease created, bound, exited (exit tracking) and settled,
// tombstone, lift, publication and retirement, made through the mount and
// the store. Two readers get
// the same stream; one opened later only the later events. SIGINT ends a
// cat blocked in its read promptly, and FS.EndEvents (the daemon's
// unmount) ends the others with EOF, so the unmount never waits for them.
func testEvents(t *testing.T, b Backend) {
	e := newEnv(t, b)
	t.Cleanup(e.st.TrackExits()) // as the daemon runs it
	events := e.path("events")
	if names := e.names("."); len(names) == 0 || containsName(names, "events") {
		t.Errorf("the root lists %q; events must be found by name only", names)
	}
	if st := e.lstat("events"); st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size != 0 {
		t.Errorf("stat events: mode %o size %d", st.Mode, st.Size)
	}
	if f, err := os.Open(events); err != nil {
		t.Fatal(err)
	} else {
		_, err := f.ReadAt(make([]byte, 10), 0)
		wantErrno(t, "pread of events", err, syscall.ESPIPE)
		f.Close()
	}
	first, second := StartEventsReader(t, events), StartEventsReader(t, events)

	sleep := harness.Sleeper(t)
	pid := sleep.Process.Pid
	if err := create(e, "generations/g000002/leases/n1"); err != nil {
		t.Fatal(err)
	}
	e.echo("pid "+strconv.Itoa(pid), "leases/n1")
	e.mustSh(`mv "$1" "$2"`, e.path("generations/g000002"), e.path("tombstones/g000002"))
	e.mustSh(`mv "$1" "$2"`, e.path("tombstones/g000002"), e.path("generations/g000002"))
	later := StartEventsReader(t, events)
	class := templatekey.SampleClass()
	g4, err := e.st.Publish(e.capture, &class)
	if err != nil {
		t.Fatal(err)
	}
	sleep.Process.Kill()
	sleep.Wait()
	for deadline := time.Now().Add(eventsHang); e.leaseFile("leases/n1").State != store.Exited; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lease n1 not exited %v after its process was killed", eventsHang)
		}
	}
	e.mustSh(`rm "$1"`, e.path("leases/n1"))
	e.mustSh(`mv "$1" "$2" && rmdir "$3"`, e.path("generations/g000003"), e.path("tombstones/g000003"), e.path("tombstones/g000003"))

	all := []wantEvent{
		{store.EventLeaseCreated, "g000002", "n1"},
		{store.EventLeaseBound, "g000002", "n1"},
		{store.EventTombstoned, "g000002", ""},
		{store.EventLifted, "g000002", ""},
		{store.EventPublished, g4.ID.String(), ""},
		{store.EventLeaseExited, "g000002", "n1"},
		{store.EventLeaseSettled, "g000002", "n1"},
		{store.EventTombstoned, "g000003", ""},
		{store.EventRetirementStarted, "g000003", ""},
		{store.EventRetirementFinished, "g000003", ""},
	}
	got := expectEvents(t, first, all)
	for _, i := range []int{1, 5, 6} {
		if got[i].PID != pid {
			t.Errorf("%s: want pid %d", got[i].Raw, pid)
		}
	}
	for i, l := range expectEvents(t, second, all) {
		if l.Raw != got[i].Raw {
			t.Errorf("second reader line %d: %s, first reader: %s", i, l.Raw, got[i].Raw)
		}
	}
	if l := expectEvents(t, later, all[4:]); l[0].Seq != got[4].Seq {
		t.Errorf("later reader starts at seq %d, want %d", l[0].Seq, got[4].Seq)
	}

	// first is blocked in its read now; Ctrl-C ends it.
	if err := first.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); !signalled(err, syscall.SIGINT) {
		t.Errorf("cat after SIGINT: %v, want killed by SIGINT", err)
	}
	e.lfs.EndEvents()
	for _, r := range []*EventsReader{second, later} {
		if err := r.Wait(); err != nil {
			t.Errorf("cat after EndEvents: %v, want exit 0 at EOF", err)
		}
	}
	if out, err := exec.Command("cat", events).CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("cat events after EndEvents: %q, %v; want nothing, exit 0", out, err)
	}
	wantErrno(t, "open events for writing", writeFile(events), syscall.EROFS)
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// signalled reports whether err, from exec.Cmd.Wait, says sig ended the
// process.
func signalled(err error, sig syscall.Signal) bool {
	exit, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// writeFile opens path for writing, returning the open's error.
func writeFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	return err
}
