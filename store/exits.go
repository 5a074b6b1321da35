package store

import (
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Exit tracking: the daemon holds a handle to the process of every bound
// lease (a pidfd on Linux, a process handle on Windows) and records the
// exit the moment the handle signals it, so that a lease follows its
// process without anyone running rm. Nothing is inferred from time: a
// lease becomes Exited only on a verdict that its process has exited.

// tracked reports whether l is bound to a process whose exit is tracked:
// states Bound, Releasing and TeardownFailed.
func tracked(l Lease) bool {
	switch l.State {
	case Bound, Releasing, TeardownFailed:
		return l.Process != nil
	}
	return false
}

// exitWaiter is implemented by the host's Processes (exits_linux.go,
// exits_windows.go). Processes injected by tests usually lack it; exits
// are then found only when tracking starts, with Processes.Check.
type exitWaiter interface {
	newExitPoller() (exitPoller, error)
}

// exitPoller waits for watched processes to exit. Each is watched under a
// token, unique for the poller's life. Safe for concurrent use.
type exitPoller interface {
	// add opens a handle to id's process, verifies that it names that
	// process (as Processes.Check does) and watches it under token. If the
	// process is not alive it watches nothing and returns the verdict.
	add(token uint64, id ProcessIdentity) (ExitVerdict, error)
	// remove stops watching token and closes its handle; an unknown
	// token is ignored.
	remove(token uint64)
	// wait blocks until watched processes have exited and returns their
	// tokens, no longer watched, their handles closed. After interrupt it
	// returns errPollerClosed.
	wait() ([]uint64, error)
	// interrupt makes wait return errPollerClosed and add refuse.
	interrupt()
	// close closes every handle the poller holds. Call it once wait has
	// returned for the last time.
	close()
}

var (
	errPollerClosed   = errors.New("exit poller closed")
	errTrackerStopped = errors.New("exit tracking stopped")
)

// exitTracker is the running exit tracking of a store (TrackExits).
type exitTracker struct {
	s      *Store
	poller exitPoller
	done   chan struct{} // closed when loop returns
	once   sync.Once

	mu      sync.Mutex
	stopped bool
	next    uint64 // the last token handed out
	byClone map[string]*watchedLease
	byToken map[uint64]*watchedLease
}

// watchedLease is one lease whose process is watched.
type watchedLease struct {
	token uint64
	clone string
	seq   uint64
	id    ProcessIdentity
}

// exitFinding is what one look at a lease's process found: an exit (the
// verdict), or why it could not tell (checkErr).
type exitFinding struct {
	clone    string
	seq      uint64
	id       ProcessIdentity
	verdict  ExitVerdict
	checkErr string // set when the look failed or the process is uninspectable
}

// exited reports whether the finding is a verified exit.
func (f exitFinding) exited() bool {
	return f.checkErr == "" && f.verdict != ProcessAlive && f.verdict != ProcessUninspectable
}

// TrackExits starts exit tracking and returns the function that stops it.
// First it looks at the process of every lease in state Bound, Releasing
// or TeardownFailed: a verified exit (Processes.Check: exited, PID
// reused, an earlier boot) makes the lease Exited, all of them in one
// transaction; a process that cannot be inspected, or whose check fails,
// leaves its lease as it is, with the reason in Lease.CheckError; a live
// one is watched. From then on BindLease adds every lease it binds, and
// when a watched process exits its lease becomes Exited at once, in one
// transaction, with a lease-exited event and a log line; a retiring
// generation left with exited leases only is deleted (afterLeaseRemoved).
// A release or kill drops its lease from the watch set. Failures are
// logged, not returned: an exit that could not be recorded (the store
// went read-only) is recorded by the next start, or settled by rm.
//
// Call it once per Store. stop closes every handle, waits for a
// recording in progress and is idempotent; call it before Close (Close
// also stops tracking). With Processes that cannot watch (test
// fixtures), only the first look runs.
func (s *Store) TrackExits() (stop func()) {
	var t *exitTracker
	if w, ok := s.procs.(exitWaiter); ok {
		p, err := w.newExitPoller()
		if err != nil {
			s.log.Error("exit tracking unavailable: exits are recorded only at the next start or by rm", "err", err)
		} else {
			t = &exitTracker{s: s, poller: p, done: make(chan struct{}),
				byClone: map[string]*watchedLease{}, byToken: map[uint64]*watchedLease{}}
			s.exits.Store(t)
			go t.loop()
		}
	}
	if err := s.reconcileExits(t); err != nil {
		s.log.Error("exits found at start not recorded; the next start records them", "err", err)
	}
	return func() {
		if t != nil {
			s.exits.CompareAndSwap(t, nil)
			t.stop()
		}
	}
}

// reconcileExits looks at the process of every tracked lease, watching
// the live ones with t (nil: checking them only), and records what it
// found (recordExits).
func (s *Store) reconcileExits(t *exitTracker) error {
	leases, err := s.trackedLeases()
	if err != nil {
		return err
	}
	var found []exitFinding
	for _, l := range leases {
		var verdict ExitVerdict
		if t != nil {
			verdict, err = t.watch(l)
		} else {
			verdict, err = s.procs.Check(*l.Process)
		}
		if errors.Is(err, errTrackerStopped) {
			return nil
		}
		f := finding(l, verdict, err)
		if !f.exited() && f.checkErr == l.CheckError {
			continue // alive, or as uninspectable as recorded
		}
		found = append(found, f)
	}
	return s.recordExits(found)
}

// trackedLeases returns every tracked lease, in one read transaction:
// those tracked_leases/ lists, so that a start reads the leases it
// watches and not all of a large store's (most are reserved or exited).
// A listed lease that is gone or no longer tracked is skipped (Check
// reports the row).
func (s *Store) trackedLeases() ([]Lease, error) {
	var out []Lease
	err := s.db.View(func(tx *bolt.Tx) error {
		leases := tx.Bucket(bucketLeases)
		return tx.Bucket(bucketTrackedLeases).ForEach(func(k, _ []byte) error {
			l, found, err := getLease(leases, k)
			if err != nil {
				return err
			}
			if found && tracked(l) {
				out = append(out, l)
			}
			return nil
		})
	})
	return out, err
}

// finding is the exitFinding of a look at l's process that gave verdict
// and err.
func finding(l Lease, verdict ExitVerdict, err error) exitFinding {
	f := exitFinding{clone: l.CloneID, seq: l.Seq, id: *l.Process, verdict: verdict}
	switch {
	case err != nil:
		f.checkErr = fmt.Sprintf("check %v: %v", *l.Process, err)
	case verdict == ProcessUninspectable:
		f.checkErr = refusal(*l.Process, verdict).Error()
	}
	return f
}

// recordExits writes found in one transaction: each verified exit makes
// its lease Exited (ExitedAt, Exit, UpdatedAt; CheckError cleared), each
// other finding sets CheckError. A finding whose lease has since gone,
// been acquired again (another Seq), been rebound or left the tracked
// states is skipped. After the commit it logs and emits every exit and
// lets the generations concerned finish a retirement.
func (s *Store) recordExits(found []exitFinding) error {
	if len(found) == 0 {
		return nil
	}
	var exited, uninspected []Lease
	err := s.update(faultExitCommit, func(tx *bolt.Tx) error {
		exited, uninspected = nil, nil
		now := s.now().UTC()
		for _, f := range found {
			l, err := readLeaseTx(tx, f.clone)
			switch {
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return err
			case l.Seq != f.seq || !tracked(l) || !l.Process.SameProcess(f.id):
				continue
			case f.exited():
				s.countLease(tx, l.State, Exited)
				l.State, l.UpdatedAt, l.ExitedAt, l.Exit, l.CheckError = Exited, now, now, f.verdict.String(), ""
				exited = append(exited, l)
			case l.CheckError != f.checkErr:
				l.CheckError = f.checkErr
				uninspected = append(uninspected, l)
			default:
				continue
			}
			if err := s.putLease(tx, l); err != nil {
				return err
			}
		}
		if len(exited)+len(uninspected) == 0 {
			return errUnchanged
		}
		return nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		return nil
	case err != nil:
		return fmt.Errorf("record exits: %w", err)
	}
	if len(exited) > 0 {
		failpoint("exit-recorded")
	}
	for _, l := range uninspected {
		if l.CheckError != "" {
			s.log.Warn("lease process not inspected; the lease stays as it is", "clone", l.CloneID, "seq", l.Seq, "state", l.State, "reason", l.CheckError)
		}
	}
	gens := map[GenerationID]bool{}
	for _, l := range exited {
		s.log.Info("lease exited", "clone", l.CloneID, "seq", l.Seq, "verdict", l.Exit, "process", l.Process.String())
		s.emit(Event{Kind: EventLeaseExited, Generation: l.Generation, KeyID: l.KeyID, CloneID: l.CloneID, LeaseSeq: l.Seq, PID: l.Process.PID})
		gens[l.Generation] = true
	}
	for gen := range gens {
		s.afterLeaseRemoved(gen)
	}
	return nil
}

// watchExit adds the lease of cloneID with sequence number seq to exit
// tracking, if tracking runs and the lease is tracked. An exit found on
// the way is recorded at once; a process that cannot be watched is
// logged, and its lease left as it is (the next start records why).
// BindLease calls it after every bind, KillLease after a kill that left
// the lease.
func (s *Store) watchExit(cloneID string, seq uint64) {
	t := s.exits.Load()
	if t == nil {
		return
	}
	l, err := s.Lease(cloneID)
	if err != nil || l.Seq != seq || !tracked(l) {
		return
	}
	verdict, err := t.watch(l)
	if errors.Is(err, errTrackerStopped) {
		return
	}
	switch f := finding(l, verdict, err); {
	case f.exited():
		if err := s.recordExits([]exitFinding{f}); err != nil {
			s.log.Error("exit not recorded; the next start records it, or rm settles the lease", "clone", cloneID, "err", err)
		}
	case f.checkErr != "":
		s.log.Warn("lease process not watched; its exit is found by the next start or by rm", "clone", cloneID, "seq", seq, "reason", f.checkErr)
	}
}

// unwatchExit drops the lease of cloneID with sequence number seq from
// exit tracking, closing its handle; a release or kill calls it.
func (s *Store) unwatchExit(cloneID string, seq uint64) {
	if t := s.exits.Load(); t != nil {
		t.unwatch(cloneID, seq)
	}
}

// watch starts watching l's process, unless it already watches it, and
// returns ProcessAlive; a process not alive is not watched, and its
// verdict returned. A clone's earlier lease still watched is dropped.
func (t *exitTracker) watch(l Lease) (ExitVerdict, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return 0, errTrackerStopped
	}
	if w := t.byClone[l.CloneID]; w != nil {
		if w.seq == l.Seq && w.id.SameProcess(*l.Process) {
			return ProcessAlive, nil
		}
		t.dropLocked(w)
	}
	t.next++
	verdict, err := t.poller.add(t.next, *l.Process)
	if errors.Is(err, errPollerClosed) {
		return 0, errTrackerStopped
	}
	if err != nil || verdict != ProcessAlive {
		return verdict, err
	}
	w := &watchedLease{token: t.next, clone: l.CloneID, seq: l.Seq, id: *l.Process}
	t.byClone[w.clone], t.byToken[w.token] = w, w
	return ProcessAlive, nil
}

// unwatch drops the lease of clone with sequence number seq, if watched.
func (t *exitTracker) unwatch(clone string, seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.byClone[clone]; w != nil && w.seq == seq {
		t.dropLocked(w)
	}
}

func (t *exitTracker) dropLocked(w *watchedLease) {
	delete(t.byClone, w.clone)
	delete(t.byToken, w.token)
	t.poller.remove(w.token)
}

// loop records the exits the poller reports until it is interrupted.
func (t *exitTracker) loop() {
	defer close(t.done)
	for {
		tokens, err := t.poller.wait()
		if errors.Is(err, errPollerClosed) {
			return
		}
		if err != nil {
			t.mu.Lock()
			t.stopped = true
			t.mu.Unlock()
			t.s.log.Error("exit tracking stopped: exits are recorded only at the next start or by rm", "err", err)
			return
		}
		var found []exitFinding
		t.mu.Lock()
		for _, tok := range tokens {
			if w := t.byToken[tok]; w != nil {
				delete(t.byToken, tok)
				delete(t.byClone, w.clone)
				found = append(found, exitFinding{clone: w.clone, seq: w.seq, id: w.id, verdict: ProcessExited})
			}
		}
		t.mu.Unlock()
		if err := t.s.recordExits(found); err != nil {
			t.s.log.Error("exit not recorded; the next start records it, or rm settles the lease", "err", err)
		}
	}
}

// stop ends tracking: no more watches, the loop ended (a recording in
// progress finished), every handle closed. Idempotent.
func (t *exitTracker) stop() {
	t.once.Do(func() {
		t.mu.Lock()
		t.stopped = true
		t.mu.Unlock()
		t.poller.interrupt()
		<-t.done
		t.poller.close()
	})
}
