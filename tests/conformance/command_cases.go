//go:build linux

package conformance

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/store"
)

// bash runs script with bash -c and args as $1...; it fails the test if
// bash fails. The shell's own printf and echo builtins make the writes.
func (e *env) bash(script string, args ...string) {
	e.t.Helper()
	out, err := exec.Command("bash", append([]string{"-c", script, "bash"}, args...)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("bash -c %q %q: %v: %s", script, args, err, out)
	}
}

// rawWrites opens rel O_WRONLY|O_TRUNC and makes one write(2) per part,
// then close(2); it returns the first error, naming the call.
func (e *env) rawWrites(rel string, parts ...string) error {
	fd, err := unix.Open(e.path(rel), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if n, err := unix.Write(fd, []byte(p)); err != nil || n != len(p) {
			unix.Close(fd)
			return &os.PathError{Op: "write " + p, Path: rel, Err: errors.Join(err, syscall.EIO)}
		}
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: rel, Err: err}
	}
	return nil
}

// state returns the store state of generation i (0-based) of the env.
func (e *env) state(i int) store.GenerationState {
	e.t.Helper()
	g, err := e.st.Generation(e.gens[i].ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return g.State
}

// testCommandLines writes lease and ctl commands as shells and programs
// do: a command and an empty line in two writes, one command split over
// two writes, a command without newline (run at close, its error returned
// by close), two commands in one write, and an append.
func testCommandLines(t *testing.T, b Backend) {
	e := newEnv(t, b)
	ctl2 := "generations/g000002/ctl"

	// bash's printf writes "tombstone\n" and "\n" with two write(2)s.
	e.bash(`printf 'tombstone\n\n' > "$1"`, e.path(ctl2))
	if got := e.state(1); got != store.Tombstoned {
		t.Fatalf("after printf 'tombstone\\n\\n': %s", got)
	}
	// Two builtins, one open: "li" and "ft\n" are one line.
	e.bash(`{ printf li; printf 'ft\n'; } > "$1"`, e.path("tombstones/g000002/ctl"))
	if got := e.state(1); got != store.Published {
		t.Fatalf("after a lift split over two writes: %s", got)
	}
	// The same from a program: two write(2) calls on one descriptor.
	if err := e.rawWrites(ctl2, "tomb", "stone\n"); err != nil {
		t.Fatal(err)
	}
	if got := e.state(1); got != store.Tombstoned {
		t.Fatalf("after write(tomb), write(stone\\n): %s", got)
	}
	// No newline: the command runs at close.
	e.bash(`printf lift > "$1"`, e.path("tombstones/g000002/ctl"))
	if got := e.state(1); got != store.Published {
		t.Fatalf("after printf lift (no newline): %s", got)
	}
	// A refused final command fails close(2) with its errno: the write
	// itself succeeded, the command had not run yet.
	err := e.rawWrites(ctl2, "retire")
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "close" || !errors.Is(err, syscall.EPERM) {
		t.Errorf("retire of a published generation at close: %v, want close: EPERM", err)
	}
	err = e.rawWrites(ctl2, "bogus")
	if !errors.As(err, &pe) || pe.Op != "close" || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("bad command at close: %v, want close: EINVAL", err)
	}
	if got := e.state(1); got != store.Published {
		t.Fatalf("after refused commands: %s", got)
	}
	// O_APPEND writes at the file's size: the offset plays no part.
	e.bash(`echo tombstone >> "$1"`, e.path(ctl2))
	if got := e.state(1); got != store.Tombstoned {
		t.Fatalf("after echo tombstone >> ctl: %s", got)
	}

	// Two commands in one write: each acts, in order. g000001 holds c1,
	// so retire leaves it in retiring/.
	if err := e.rawWrites("generations/g000001/ctl", "tombstone\nretire\n"); err != nil {
		t.Fatal(err)
	}
	if got := e.state(0); got != store.Retiring {
		t.Fatalf("after tombstone and retire in one write: %s", got)
	}
	e.wantListed("retiring", "g000001")

	// cancel without newline, at close, runs once: a second run would
	// find the lease gone and fail close with ENOENT.
	if err := e.rawWrites("leases/c1", "\n", "cancel"); err != nil {
		t.Fatalf("cancel at close: %v", err)
	}
	e.wantGone("leases/c1")
	e.wantGone("retiring/g000001")
}
