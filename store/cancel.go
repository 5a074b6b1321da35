package store

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// CancelLease ends the Reserved lease of cloneID: the explicit
// cancellation, the only way a reservation ends (ReleaseLease and
// KillLease refuse a Reserved lease with ErrLeaseReserved). It first
// looks for processes of this boot that carry the lease's launch ID in
// their initial environment (LaunchEnv, /proc/<pid>/environ): while one
// does, the clone it was handed to may still open its payload and bind
// the lease, so the cancel is refused with ErrLaunchInUse and the lease
// stays. Processes whose environment the daemon may not read (another
// user's while the daemon is not root; hidepid) cannot be checked: they
// are skipped as processes of other users, and the cancel logs how many
// were. On Windows no environment is read: the cancel logs that the check
// was not made. Then, in one transaction, it deletes the lease record and
// its generation index row if the lease is still that Reserved lease,
// and lets a retiring generation that holds no more leases be deleted.
// Errors: ErrInvalidID, ErrNotFound, ErrLeaseBound (the lease is bound:
// it ends by rm once its process has exited, or by kill), ErrLaunchInUse,
// ErrReadOnly.
func (s *Store) CancelLease(cloneID string) error { return s.CancelLeaseSeq(cloneID, 0) }

// CancelLeaseSeq is CancelLease of the lease whose fencing sequence
// number is seq (zero: whichever lease cloneID holds); a lease of the
// clone with another sequence number is left alone and ErrNotFound
// returned.
func (s *Store) CancelLeaseSeq(cloneID string, seq uint64) error {
	if err := s.ReadOnly(); err != nil {
		return fmt.Errorf("cancel lease %q: %w", cloneID, err)
	}
	lease, err := s.Lease(cloneID)
	if err == nil {
		err = lease.sameSeq(seq)
	}
	switch {
	case err != nil:
		return fmt.Errorf("cancel lease %q: %w", cloneID, err)
	case lease.State != Reserved:
		return fmt.Errorf("cancel lease %q: %w", cloneID, cancelBoundRefusal(lease))
	}
	pids, skipped, err := launchCarriers(lease.LaunchID)
	switch {
	case errors.Is(err, errNoEnviron):
		s.log.Warn("cancel: no process can be checked for the launch ID on this platform", "clone", cloneID, "seq", lease.Seq)
	case err != nil:
		return fmt.Errorf("cancel lease %q: look for processes carrying its launch ID: %w", cloneID, err)
	case len(pids) > 0:
		return fmt.Errorf("cancel lease %q: pids %v carry its launch ID in %s: %w", cloneID, pids, LaunchEnv, ErrLaunchInUse)
	case skipped > 0:
		s.log.Info("cancel: processes whose environment this daemon may not read were not checked for the launch ID", "clone", cloneID, "skipped", skipped)
	}
	err = s.update(faultCancelCommit, func(tx *bolt.Tx) error {
		now, err := readLeaseTx(tx, cloneID)
		if err == nil {
			err = now.sameSeq(lease.Seq)
		}
		switch {
		case err != nil:
			return err
		case now.State != Reserved:
			return cancelBoundRefusal(now)
		}
		return s.deleteLeaseRecord(tx, now)
	})
	if err != nil {
		return fmt.Errorf("cancel lease %q: %w", cloneID, err)
	}
	failpoint("cancel-committed")
	s.log.Info("lease cancelled", "clone", cloneID, "seq", lease.Seq, "generation", lease.Generation.String())
	s.emit(Event{Kind: EventLeaseCancelled, Generation: lease.Generation, KeyID: lease.KeyID, CloneID: cloneID, LeaseSeq: lease.Seq})
	s.afterLeaseRemoved(lease.Generation)
	return nil
}

// cancelBoundRefusal is the error of a cancel of lease, which is not
// Reserved.
func cancelBoundRefusal(l Lease) error {
	return fmt.Errorf("lease %q is %s to %v, not reserved (rm it once its process has exited, or write kill): %w", l.CloneID, l.State, l.Process, ErrLeaseBound)
}
