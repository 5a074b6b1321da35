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
func (s *Store) bindLease(cloneID string, seq uint64, pid int, r bindRoute) (_ Lease, err error) {
	defer s.observeLeaseOp("bind", time.Now(), &err)
	if err := ValidateCloneID(cloneID); err != nil {
		return Lease{}, err
	}
	s.awaitClone(cloneID) // a lease whose commit is running: bind its outcome
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
		if err := lease.sameSeq(seq); err != nil {
			return err
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
		s.countLease(tx, lease.State, Bound)
		lease.State, lease.Process, lease.BoundAt, lease.UpdatedAt = Bound, &id, now, now
		return s.putLease(tx, lease)
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
