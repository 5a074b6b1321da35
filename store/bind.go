package store

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BindLease binds the Reserved lease of cloneID to the running process
// pid: it reads the process identity first (Processes.Identify: on Linux a
// pidfd, the pidfs inode number, the /proc start time and the boot ID),
// then in one transaction re-checks that the lease's generation is still
// eligible (published and inside its restore window, as AcquireLease
// checks) and sets State Bound, Process, BoundAt and UpdatedAt. Binding
// again to the same process (same identity) returns the lease unchanged,
// in whatever state it is. Errors: ErrInvalidID (clone ID; pid <= 0, pid
// 1, this process, or a kernel thread, none of which exits like a clone),
// ErrNoProcess (no such process, a thread that is not a thread-group
// leader, or an exited one), ErrProcessUninspectable, ErrNotFound (no
// lease), ErrLeaseBound (bound to another process, even one that has
// since exited: release it and acquire a new lease), ErrTombstoned,
// ErrRetiring, ErrIneligible (the generation may not be restored now; the
// message gives the reason; the lease stays Reserved).
//
// Writing `pid N` to a lease file binds through here; so does the
// automatic binding at a payload open (BindLaunched), through bindLease.
func (s *Store) BindLease(cloneID string, pid int) (Lease, error) {
	return s.BindLeaseSeq(cloneID, 0, pid)
}

// BindLeaseSeq is BindLease of the lease whose fencing sequence number is
// seq (zero: whichever lease cloneID holds). If the clone's lease has
// another sequence number, the lease the caller meant was released (and
// the clone ID acquired again): it returns ErrNotFound and leaves the
// newer lease alone.
func (s *Store) BindLeaseSeq(cloneID string, seq uint64, pid int) (Lease, error) {
	return s.bindLease(cloneID, seq, pid, bindByPID)
}

// bindRoute is how a bind was asked for: its error point, its kill
// point after the commit, and how its log line names it.
type bindRoute struct {
	fault     faultPoint
	committed func()
	via       string
}

var (
	bindByPID    = bindRoute{faultBindCommit, func() { failpoint("bind-committed") }, "pid"}
	bindByLaunch = bindRoute{faultAutoBindCommit, func() { failpoint("autobind-committed") }, "launch-id"}
)

// bindLease is BindLeaseSeq through route r: the one bind path.
func (s *Store) bindLease(cloneID string, seq uint64, pid int, r bindRoute) (Lease, error) {
	if err := ValidateCloneID(cloneID); err != nil {
		return Lease{}, err
	}
	switch {
	case pid <= 0:
		return Lease{}, fmt.Errorf("bind lease %q: pid %d: want a positive process ID: %w", cloneID, pid, ErrInvalidID)
	case pid == 1:
		return Lease{}, fmt.Errorf("bind lease %q: pid 1 is init, not a clone: %w", cloneID, ErrInvalidID)
	case pid == os.Getpid():
		return Lease{}, fmt.Errorf("bind lease %q: pid %d is this store's own process, not a clone: %w", cloneID, pid, ErrInvalidID)
	}
	id, err := s.procs.Identify(pid)
	if err != nil {
		return Lease{}, fmt.Errorf("bind lease %q: %w", cloneID, err)
	}
	facts, factsErr := s.host.Facts()
	var lease Lease
	err = s.update(r.fault, func(tx *bolt.Tx) error {
		var err error
		if lease, err = readLeaseTx(tx, cloneID); err != nil {
			return err
		}
		if seq != 0 && lease.Seq != seq {
			return fmt.Errorf("lease %q has sequence %d, not %d (released and acquired again): %w", cloneID, lease.Seq, seq, ErrNotFound)
		}
		if lease.State != Reserved {
			if lease.Process != nil && lease.Process.SameProcess(id) {
				return errUnchanged
			}
			return fmt.Errorf("lease %q is %s to %v, not %v: %w", cloneID, lease.State, lease.Process, id, ErrLeaseBound)
		}
		g, err := getGeneration(tx, lease.Generation)
		if err != nil {
			return err
		}
		if err := checkEligible(tx, g, facts, factsErr); err != nil {
			return fmt.Errorf("lease %q: %w", cloneID, err)
		}
		now := s.now().UTC()
		lease.State, lease.Process, lease.BoundAt, lease.UpdatedAt = Bound, &id, now, now
		return putJSON(tx.Bucket(bucketLeases), []byte(cloneID), lease)
	})
	switch {
	case errors.Is(err, errUnchanged):
		return lease, nil
	case err != nil:
		return Lease{}, fmt.Errorf("bind lease %q: %w", cloneID, err)
	}
	r.committed()
	s.log.Info("lease bound", "clone", cloneID, "seq", lease.Seq, "process", id.String(), "via", r.via)
	s.emit(Event{Kind: EventLeaseBound, Generation: lease.Generation, KeyID: lease.KeyID, CloneID: cloneID, LeaseSeq: lease.Seq, PID: id.PID})
	s.watchExit(cloneID, lease.Seq)
	return lease, nil
}

// KillLease asks for a forced teardown of cloneID's clone. A Reserved
// lease has no process: it is refused with ErrLeaseReserved and stays
// (CancelLease ends it). An Exited lease is ReleaseLease. Otherwise it
// sends SIGKILL to the bound
// process (through a pidfd, only after verifying the identity), waits up
// to wait for it to exit (zero checks once), and then releases as
// ReleaseLease does. If the process survives the wait or cannot be
// signalled, the lease stays with State TeardownFailed and KillLease
// returns ErrTeardownFailed; a later release or KillLease verifies again.
// Other errors: ErrInvalidID, ErrNotFound, ErrProcessUninspectable (the
// identity could not be verified, so nothing was signalled; the lease is
// unchanged), and ReleaseLease's. The exit the kill causes is settled by
// the release, not recorded by exit tracking (TrackExits): the lease
// leaves the watch set during the kill and rejoins it if it stays.
func (s *Store) KillLease(cloneID string, wait time.Duration) error {
	return s.KillLeaseSeq(cloneID, 0, wait)
}

// KillLeaseSeq is KillLease of the lease whose fencing sequence number is
// seq (zero: whichever lease cloneID holds); a lease of the clone with
// another sequence number is left alone and ErrNotFound returned, so a
// stale handle never tears down a newer clone.
func (s *Store) KillLeaseSeq(cloneID string, seq uint64, wait time.Duration) (err error) {
	if err := s.ReadOnly(); err != nil { // the kill could not be recorded
		return fmt.Errorf("kill lease %q: %w", cloneID, err)
	}
	lease, err := s.Lease(cloneID)
	if err != nil {
		return err
	}
	if seq != 0 && lease.Seq != seq {
		return fmt.Errorf("kill lease %q: it has sequence %d, not %d (released and acquired again): %w", cloneID, lease.Seq, seq, ErrNotFound)
	}
	switch lease.State {
	case Reserved:
		return fmt.Errorf("kill lease %q: it has no process (write cancel to end it): %w", cloneID, ErrLeaseReserved)
	case Exited:
		return s.ReleaseLeaseSeq(cloneID, lease.Seq)
	}
	if lease.Process == nil {
		return fmt.Errorf("kill lease %q: state %s without a process record", cloneID, lease.State)
	}
	s.unwatchExit(cloneID, lease.Seq)
	defer func() {
		if err != nil {
			s.watchExit(cloneID, lease.Seq)
		}
	}()
	exited, err := s.procs.Kill(*lease.Process, wait)
	if errors.Is(err, ErrProcessUninspectable) {
		return fmt.Errorf("kill lease %q: %w", cloneID, err)
	}
	failpoint("kill-signalled")
	if err == nil && exited {
		return s.ReleaseLeaseSeq(cloneID, lease.Seq)
	}
	cause := err
	if cause == nil {
		cause = fmt.Errorf("%v still running %v after SIGKILL", *lease.Process, wait)
	}
	if serr := s.casLeaseState(lease, "", TeardownFailed); serr != nil {
		return fmt.Errorf("kill lease %q: %w: %w (recording %s: %w)", cloneID, ErrTeardownFailed, cause, TeardownFailed, serr)
	}
	s.log.Warn("lease teardown failed", "clone", cloneID, "process", lease.Process.String(), "error", cause)
	return fmt.Errorf("kill lease %q: %w: %w", cloneID, ErrTeardownFailed, cause)
}

// beginRelease is ReleaseLease's first transaction. A Reserved lease is
// refused (ErrLeaseReserved: only CancelLease ends it). An Exited lease is
// deleted there (released is true). Any other is durably marked Releasing
// before its process is checked; prior is the state to restore if the
// check keeps the lease (Releasing itself restores to Bound).
func (s *Store) beginRelease(cloneID string, seq uint64) (lease Lease, prior LeaseState, released bool, err error) {
	err = s.update(faultReleaseBegin, func(tx *bolt.Tx) error {
		var err error
		if lease, err = readLeaseTx(tx, cloneID); err != nil {
			return err
		}
		if seq != 0 && lease.Seq != seq {
			return fmt.Errorf("lease %q has sequence %d, not %d (released and acquired again): %w", cloneID, lease.Seq, seq, ErrNotFound)
		}
		if lease.State == Reserved {
			return reservedRefusal(cloneID)
		}
		if lease.Process == nil {
			return fmt.Errorf("lease %q: state %s without a process record", cloneID, lease.State)
		}
		if lease.State == Exited {
			released = true
			return s.deleteLeaseRecord(tx, lease)
		}
		prior = lease.State
		if prior == Releasing {
			prior = Bound
			return errUnchanged
		}
		lease.State, lease.UpdatedAt = Releasing, s.now().UTC()
		return putJSON(tx.Bucket(bucketLeases), []byte(cloneID), lease)
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return lease, prior, released, err
}

// reservedRefusal is the error of a release of cloneID's Reserved lease.
func reservedRefusal(cloneID string) error {
	return fmt.Errorf("lease %q was never bound (write cancel to end it): %w", cloneID, ErrLeaseReserved)
}

// finishRelease deletes the lease checked by ReleaseLease. If the record
// is gone or is another lease (another Seq), a concurrent release already
// removed the checked one: nothing to do.
func (s *Store) finishRelease(checked Lease) error {
	err := s.update(faultReleaseFinish, func(tx *bolt.Tx) error {
		lease, err := readLeaseTx(tx, checked.CloneID)
		if errors.Is(err, ErrNotFound) {
			return errUnchanged
		}
		if err != nil {
			return err
		}
		if lease.Seq != checked.Seq {
			return errUnchanged
		}
		return s.deleteLeaseRecord(tx, lease)
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// casLeaseState writes state and UpdatedAt into the lease of
// which.CloneID if it is still the same lease (same Seq), is neither
// Reserved nor Exited (its process has exited: that is final) and, when
// from is not empty, is in state from. Otherwise a concurrent
// release, kill or rebind changed it, and it is left alone.
func (s *Store) casLeaseState(which Lease, from, state LeaseState) error {
	err := s.update(faultLeaseState, func(tx *bolt.Tx) error {
		lease, err := readLeaseTx(tx, which.CloneID)
		if errors.Is(err, ErrNotFound) {
			return errUnchanged
		}
		if err != nil {
			return err
		}
		if lease.Seq != which.Seq || lease.State == Reserved || lease.State == Exited || lease.State == state || from != "" && lease.State != from {
			return errUnchanged
		}
		lease.State, lease.UpdatedAt = state, s.now().UTC()
		return putJSON(tx.Bucket(bucketLeases), []byte(lease.CloneID), lease)
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// deleteLeaseRecord deletes lease's record and its generation index row,
// and records the change of the generation's lease set (leasesChanged).
func (s *Store) deleteLeaseRecord(tx *bolt.Tx, lease Lease) error {
	if err := tx.Bucket(bucketLeases).Delete([]byte(lease.CloneID)); err != nil {
		return err
	}
	if gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(lease.Generation)); gl != nil {
		if err := gl.Delete([]byte(lease.CloneID)); err != nil {
			return err
		}
	}
	return s.leasesChanged(tx, lease.Generation)
}

// leasesChanged records now as when generation gen's lease set last
// changed (a lease granted or released): the sequence of its
// generation_leases bucket holds it, in Unix nanoseconds, so a lease
// writes no generation record (their decoding is cached by content,
// gencache.go). A generation without the bucket is left alone.
func (s *Store) leasesChanged(tx *bolt.Tx, gen GenerationID) error {
	gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(gen))
	if gl == nil {
		return nil
	}
	return gl.SetSequence(uint64(s.now().UnixNano()))
}

// leasesChangedAt decodes a generation_leases bucket's sequence
// (leasesChanged); zero is the zero time (no change recorded).
func leasesChangedAt(gl *bolt.Bucket) time.Time {
	if gl == nil || gl.Sequence() == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(gl.Sequence())).UTC()
}

// LeasesChangedAt returns when a lease on generation gen was last granted
// or released, or the zero time if none was recorded (no lease yet, or an
// index written before the record existed).
func (s *Store) LeasesChangedAt(gen GenerationID) (time.Time, error) {
	var t time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		t = leasesChangedAt(tx.Bucket(bucketGenerationLeases).Bucket(genKey(gen)))
		return nil
	})
	return t, err
}

func readLeaseTx(tx *bolt.Tx, cloneID string) (Lease, error) {
	var lease Lease
	found, err := getJSON(tx.Bucket(bucketLeases), []byte(cloneID), &lease)
	if err == nil && !found {
		err = fmt.Errorf("lease %q: %w", cloneID, ErrNotFound)
	}
	return lease, err
}
