package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// exitBound bounds every wait for an exit to be recorded: generous, it
// only catches hangs (2 noisy cores, -race).
const exitBound = 20 * time.Second

// trackedFixture is a fault fixture reopened with procs (the host's when
// nil) and with exit tracking started; the tracking stops at cleanup.
func trackedFixture(t *testing.T, procs Processes) (*faultFixture, func()) {
	t.Helper()
	f := newFaultFixture(t)
	f.reopen(t, procs)
	stop := f.st.TrackExits()
	t.Cleanup(stop)
	return f, stop
}

// reopen closes f's store and opens it again with procs (nil: the host's).
func (f *faultFixture) reopen(t *testing.T, procs Processes) {
	t.Helper()
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	if procs == nil {
		procs = hostProcesses()
	}
	f.opts.Processes = procs
	f.open(t)
}

// waitEvent waits (exitBound) for an event of kind on sub and returns it.
func waitEvent(t *testing.T, sub *EventStream, kind EventKind) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), exitBound)
	defer cancel()
	for {
		evs, _, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", kind, err)
		}
		for _, e := range evs {
			if e.Kind == kind {
				return e
			}
		}
	}
}

// wantExited checks that clone's lease is Exited with the verdict and a
// time, and returns it.
func wantExited(t *testing.T, st *Store, clone, verdict string) Lease {
	t.Helper()
	l, err := st.Lease(clone)
	if err != nil || l.State != Exited || l.ExitedAt.IsZero() || l.Exit != verdict || l.CheckError != "" {
		t.Fatalf("lease %s: %+v, %v; want exited (%s) with its time", clone, l, err, verdict)
	}
	return l
}

// trackerFDs counts this process's pidfds, epoll and eventfd descriptors.
func trackerFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if strings.Contains(target, "pidfd") || target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]" {
			n++
		}
	}
	return n
}

// TestTrackExits binds a lease to a real process and kills it: the lease
// becomes Exited with no release, durably, and a release settles it.
func TestTrackExits(t *testing.T) {
	f, _ := trackedFixture(t, nil)
	sub := f.st.Subscribe()
	defer sub.Close()
	pid := f.sleeper(t)
	if _, err := f.st.BindLease("held", pid); err != nil {
		t.Fatal(err)
	}
	f.proc.Process.Kill()
	e := waitEvent(t, sub, EventLeaseExited)
	if e.CloneID != "held" || e.PID != pid || e.Generation != f.g.ID {
		t.Errorf("event %+v, want held's exit, pid %d", e, pid)
	}
	wantExited(t, f.st, "held", "exited")
	if !strings.Contains(f.log.String(), "lease exited") {
		t.Errorf("no log line for the exit:\n%s", f.log)
	}
	if problems, err := f.st.Check(CheckOptions{}); err != nil || len(problems) != 0 {
		t.Errorf("check with an exited lease: %q, %v", problems, err)
	}
	// Durable: a reopen without tracking still reads it exited.
	f.reopen(t, nil)
	wantExited(t, f.st, "held", "exited")
	sub = f.st.Subscribe()
	defer sub.Close()
	if err := f.st.ReleaseLease("held"); err != nil {
		t.Fatalf("release of the exited lease: %v", err)
	}
	if e := waitEvent(t, sub, EventLeaseSettled); e.CloneID != "held" {
		t.Errorf("event %+v, want held settled", e)
	}
	if _, err := f.st.Lease("held"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lease after the release: %v, want ErrNotFound", err)
	}
}

// TestTrackExitsDrainsRetirement retires a generation with two bound
// leases: it is deleted once both processes have exited, with no release,
// and the exited leases stay readable until released.
func TestTrackExitsDrainsRetirement(t *testing.T) {
	f, stop := trackedFixture(t, nil)
	sub := f.st.Subscribe()
	defer sub.Close()
	if _, _, err := f.st.AcquireLease(f.g.ID, "other"); err != nil {
		t.Fatal(err)
	}
	first := f.sleeper(t)
	firstProc := f.proc
	if _, err := f.st.BindLease("held", first); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.BindLease("other", f.sleeper(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Tombstone(f.g.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Retire(f.g.ID, 0); err != nil {
		t.Fatal(err)
	}
	firstProc.Process.Kill()
	waitEvent(t, sub, EventLeaseExited)
	if g, err := f.st.Generation(f.g.ID); err != nil || g.State != Retiring {
		t.Fatalf("generation with one exited and one bound lease: %+v, %v; want retiring", g, err)
	}
	f.proc.Process.Kill()
	waitEvent(t, sub, EventRetirementFinished)
	stop() // waits for the payload's removal, which follows the event
	if _, err := f.st.Generation(f.g.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("generation after its last lease exited: %v, want deleted", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, PayloadDir, f.g.ID.String())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("payload of the retired generation: %v, want gone", err)
	}
	for _, clone := range []string{"held", "other"} {
		if l := wantExited(t, f.st, clone, "exited"); l.Generation != f.g.ID {
			t.Errorf("exited lease %s names %s, want %s", clone, l.Generation, f.g.ID)
		}
	}
	if problems, err := f.st.Check(CheckOptions{}); err != nil || len(problems) != 0 {
		t.Errorf("check with exited leases of a retired generation: %q, %v", problems, err)
	}
	for _, clone := range []string{"held", "other"} {
		if err := f.st.ReleaseLease(clone); err != nil {
			t.Errorf("release of %s: %v", clone, err)
		}
	}
	if problems, err := f.st.Check(CheckOptions{}); err != nil || len(problems) != 0 {
		t.Errorf("check after the releases: %q, %v", problems, err)
	}
}

// TestTrackExitsAtStart: a process that exited while nothing tracked it
// is recorded when tracking starts, before TrackExits returns; one whose
// recorded boot ID is another boot's is exited although its PID runs.
func TestTrackExitsAtStart(t *testing.T) {
	f := newFaultFixture(t)
	f.reopen(t, nil)
	f.bindHeld(t, true)
	if _, _, err := f.st.AcquireLease(f.g.ID, "earlier"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.BindLease("earlier", f.sleeper(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.AcquireLease(f.g.ID, "alive"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.BindLease("alive", f.sleeper(t)); err != nil {
		t.Fatal(err)
	}
	alive := f.proc
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	editLease(t, f.dir, "earlier", func(l *Lease) { l.Process.BootID = strings.Repeat("0", 32) })
	f.open(t)
	stop := f.st.TrackExits()
	defer stop()
	wantExited(t, f.st, "held", "exited")
	wantExited(t, f.st, "earlier", "earlier-boot")
	if l, err := f.st.Lease("alive"); err != nil || l.State != Bound {
		t.Fatalf("lease of the running process: %+v, %v; want bound", l, err)
	}
	// and the live one is watched.
	sub := f.st.Subscribe()
	defer sub.Close()
	alive.Process.Kill()
	if e := waitEvent(t, sub, EventLeaseExited); e.CloneID != "alive" {
		t.Errorf("event %+v, want alive's exit", e)
	}
	wantExited(t, f.st, "alive", "exited")
}

// editLease rewrites clone's record in the closed store at dir.
func editLease(t *testing.T, dir, clone string, edit func(*Lease)) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, IndexFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		l, err := readLeaseTx(tx, clone)
		if err != nil {
			return err
		}
		edit(&l)
		return writeLeaseRow(tx, l)
	}); err != nil {
		t.Fatal(err)
	}
}

// hiddenProcesses is the host's Processes, except that Check finds every
// process uninspectable, as /proc mounted with hidepid makes them.
type hiddenProcesses struct{ Processes }

func (hiddenProcesses) Check(ProcessIdentity) (ExitVerdict, error) {
	return ProcessUninspectable, nil
}

// TestTrackExitsUninspectable: at start, a process that cannot be
// inspected leaves its lease bound, with the reason in the record; a
// later start that can inspect it clears the reason.
func TestTrackExitsUninspectable(t *testing.T) {
	f := newFaultFixture(t)
	f.bindHeld(t, false)
	f.reopen(t, hiddenProcesses{hostProcesses()})
	f.st.TrackExits()()
	l, err := f.st.Lease("held")
	if err != nil || l.State != Bound || !strings.Contains(l.CheckError, ErrProcessUninspectable.Error()) {
		t.Fatalf("lease of an uninspectable process: %+v, %v; want bound with the reason", l, err)
	}
	if !strings.Contains(f.log.String(), "not inspected") {
		t.Errorf("no log line for the uninspectable process:\n%s", f.log)
	}
	f.reopen(t, nil)
	stop := f.st.TrackExits()
	defer stop()
	if l, err := f.st.Lease("held"); err != nil || l.State != Bound || l.CheckError != "" {
		t.Errorf("lease once inspectable: %+v, %v; want bound, no reason", l, err)
	}
}

// survivingProcesses is the host's Processes (exit tracking included),
// except that Kill reports a process that survived SIGKILL.
type survivingProcesses struct{ linuxProcesses }

func (survivingProcesses) Kill(ProcessIdentity, time.Duration) (bool, error) { return false, nil }

// TestTrackExitsTeardownFailed: a lease whose kill failed stays watched,
// and becomes Exited when its process exits after all.
func TestTrackExitsTeardownFailed(t *testing.T) {
	f, _ := trackedFixture(t, survivingProcesses{hostProcesses().(linuxProcesses)})
	sub := f.st.Subscribe()
	defer sub.Close()
	if _, err := f.st.BindLease("held", f.sleeper(t)); err != nil {
		t.Fatal(err)
	}
	if err := f.st.KillLease("held", 0); !errors.Is(err, ErrTeardownFailed) {
		t.Fatalf("kill: %v, want ErrTeardownFailed", err)
	}
	f.proc.Process.Kill()
	waitEvent(t, sub, EventLeaseExited)
	wantExited(t, f.st, "held", "exited")
}

// TestTrackExitsReleasesHandles: a kill and a release drop their lease's
// pidfd, and stop closes the rest, the epoll and the eventfd.
func TestTrackExitsReleasesHandles(t *testing.T) {
	f := newFaultFixture(t)
	f.reopen(t, nil)
	pids := map[string]int{}
	for _, clone := range []string{"a", "b", "c"} {
		if _, _, err := f.st.AcquireLease(f.g.ID, clone); err != nil {
			t.Fatal(err)
		}
		pids[clone] = f.sleeper(t) // os/exec holds a pidfd of its own
	}
	before := trackerFDs(t)
	stop := f.st.TrackExits()
	for clone, pid := range pids {
		if _, err := f.st.BindLease(clone, pid); err != nil {
			t.Fatal(err)
		}
	}
	if got := trackerFDs(t) - before; got != 2+3 {
		t.Errorf("%d tracker descriptors with three watched leases, want 5 (epoll, eventfd, 3 pidfds)", got)
	}
	if err := f.st.KillLease("a", exitBound); err != nil {
		t.Fatalf("kill of a: %v", err)
	}
	if _, err := f.st.Lease("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lease a after the kill: %v, want released", err)
	}
	if got := trackerFDs(t) - before; got != 2+2 {
		t.Errorf("%d tracker descriptors after the kill, want 4", got)
	}
	stop()
	stop() // idempotent
	if got := trackerFDs(t) - before; got != 0 {
		t.Errorf("%d tracker descriptors left after stop", got)
	}
	if l, err := f.st.Lease("b"); err != nil || l.State != Bound {
		t.Errorf("lease b after stop: %+v, %v; want bound", l, err)
	}
}
