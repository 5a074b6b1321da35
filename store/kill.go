package store

import (
	"errors"
	"fmt"
	"time"
)

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
	if err := lease.sameSeq(seq); err != nil {
		return fmt.Errorf("kill lease %q: %w", cloneID, err)
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
