package store

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ReleaseLease removes the lease of cloneID once its clone has verifiably
// exited; a lease never expires by timeout. A Reserved lease is refused
// with ErrLeaseReserved and stays: its clone may be starting, and only
// an explicit CancelLease ends a reservation. An Exited lease's exit is
// already recorded: it is settled (deleted) at once, without a check.
// Any other is first durably marked Releasing, then its process is
// checked (Processes.Check):
//
//   - exited, PID reused by another process, or an earlier boot: the
//     lease record and its generation index row are deleted in one
//     transaction;
//   - alive: the previous state is restored (Bound, or TeardownFailed) so
//     the record does not claim a release in progress, and
//     ErrProcessAlive is returned;
//   - uninspectable: likewise restored, ErrProcessUninspectable.
//
// A lease found Releasing (the daemon died during a release) is left so
// by Open and checked again by the next ReleaseLease or KillLease (or
// made Exited by exit tracking once its process has exited).
// After a removal it lets a retiring generation that no longer holds
// leases be deleted (afterLeaseRemoved). Errors: ErrInvalidID,
// ErrNotFound, ErrLeaseReserved, ErrProcessAlive, ErrProcessUninspectable, or the check's
// own error (state restored).
func (s *Store) ReleaseLease(cloneID string) error { return s.ReleaseLeaseSeq(cloneID, 0) }

// ReleaseLeaseSeq is ReleaseLease of the lease whose fencing sequence
// number is seq (zero: whichever lease cloneID holds). If the clone's lease
// has another sequence number, the lease the caller meant was already
// released (and the clone ID acquired again): it returns ErrNotFound and
// leaves the newer lease alone.
func (s *Store) ReleaseLeaseSeq(cloneID string, seq uint64) (err error) {
	defer s.observeLeaseOp("release", time.Now(), &err)
	if err := ValidateCloneID(cloneID); err != nil {
		return err
	}
	// A reservation, or a live or hidden process, refuses the release.
	// Check it before any write, so that a refusal leaves the store
	// exactly as it was; the check is repeated after the lease is durably
	// marked Releasing.
	if err := s.CheckRelease(cloneID, seq); errors.Is(err, ErrLeaseReserved) || errors.Is(err, ErrProcessAlive) || errors.Is(err, ErrProcessUninspectable) {
		return fmt.Errorf("release lease %q: %w", cloneID, err)
	}
	lease, prior, released, err := s.beginRelease(cloneID, seq)
	if err != nil {
		return fmt.Errorf("release lease %q: %w", cloneID, err)
	}
	if released {
		failpoint("release-committed")
		s.log.Info("lease released", "clone", cloneID, "seq", lease.Seq, "state", Exited, "process", lease.Process.String())
		s.emit(Event{Kind: EventLeaseSettled, Generation: lease.Generation, KeyID: lease.KeyID, CloneID: cloneID, LeaseSeq: lease.Seq, PID: lease.Process.PID})
		s.afterLeaseRemoved(lease.Generation)
		return nil
	}
	failpoint("release-marked")
	verdict, err := s.procs.Check(*lease.Process)
	switch {
	case err != nil:
		err = fmt.Errorf("check %v: %w", *lease.Process, err)
	case verdict == ProcessAlive || verdict == ProcessUninspectable:
		err = refusal(*lease.Process, verdict)
	default:
		if err := s.finishRelease(lease); err != nil {
			return fmt.Errorf("release lease %q: %w", cloneID, err)
		}
		failpoint("release-committed")
		s.unwatchExit(cloneID, lease.Seq)
		s.log.Info("lease released", "clone", cloneID, "seq", lease.Seq, "verdict", verdict.String(), "process", lease.Process.String())
		s.emit(Event{Kind: EventLeaseSettled, Generation: lease.Generation, KeyID: lease.KeyID, CloneID: cloneID, LeaseSeq: lease.Seq, PID: lease.Process.PID})
		s.afterLeaseRemoved(lease.Generation)
		return nil
	}
	if rerr := s.casLeaseState(lease, Releasing, prior); rerr != nil {
		return fmt.Errorf("release lease %q: %w (restoring state %s: %w)", cloneID, err, prior, rerr)
	}
	return fmt.Errorf("release lease %q: %w", cloneID, err)
}

// CheckRelease answers, changing nothing, whether ReleaseLeaseSeq of
// cloneID and seq would be refused now: ErrLeaseReserved for a Reserved
// lease, ErrProcessAlive or
// ErrProcessUninspectable (wrapped, naming the process) for a bound lease
// whose process still runs or cannot be inspected, the check's own error
// when the process cannot be checked, ErrNotFound when the lease is gone
// or has another sequence number (seq zero: any), else nil. The process
// can change between the answer and a release; the release checks again.
func (s *Store) CheckRelease(cloneID string, seq uint64) error {
	l, err := s.Lease(cloneID)
	if err == nil {
		err = l.sameSeq(seq)
	}
	switch {
	case err != nil:
		return err
	case l.State == Reserved:
		return reservedRefusal(cloneID)
	case l.State == Exited || l.Process == nil:
		return nil
	}
	v, err := s.procs.Check(*l.Process)
	switch {
	case err != nil:
		return fmt.Errorf("check %v: %w", *l.Process, err)
	case v == ProcessAlive || v == ProcessUninspectable:
		return refusal(*l.Process, v)
	}
	return nil
}

// refusal is the error of a release refused by verdict (ProcessAlive or
// ProcessUninspectable) on process p.
func refusal(p ProcessIdentity, verdict ExitVerdict) error {
	if verdict == ProcessUninspectable {
		return fmt.Errorf("%v: %w", p, ErrProcessUninspectable)
	}
	return fmt.Errorf("%v: %w", p, ErrProcessAlive)
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
		if err := lease.sameSeq(seq); err != nil {
			return err
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
		s.countLease(tx, lease.State, Releasing)
		lease.State, lease.UpdatedAt = Releasing, s.now().UTC()
		return s.putLease(tx, lease)
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
	return s.changeSameLease(faultReleaseFinish, checked, s.deleteLeaseRecord)
}
