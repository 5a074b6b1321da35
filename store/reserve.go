package store

import (
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Reservation is a lease granted in memory by ReserveLease or
// ReserveLeaseByKey whose record a group commit, shared with concurrent
// reservations, is writing. The grant was decided as AcquireLease decides
// it (eligibility, conflicts, the fencing sequence number and launch ID
// are all fixed), but nothing is acknowledged until Wait returns nil: a
// caller that learns of the lease from anything but a nil Wait has not
// been told it exists.
//
// Until its commit ends, the lease is visible to no one else: lease
// listings leave it out, and every call that names its clone ID (Lease,
// a second acquisition, bind, cancel, kill, release) or its launch ID
// (BindLaunched) first waits for that commit, then answers from the index
// as if the lease had been committed (or, if the commit failed, never
// made). A failed commit leaves no record: the lease does not exist.
type Reservation struct {
	// Lease is the granted lease, its record as committed; for a retry
	// (Created false), the clone's existing lease.
	Lease Lease
	// Created reports whether the reservation made the lease; false is a
	// retry that found the clone's lease on the same generation or key,
	// already durable.
	Created bool

	done chan struct{} // closed once the commit has ended
	err  error         // the commit's error, set before done is closed
}

// Wait returns nil once the reservation's lease record is durable, or the
// error of its commit, in which case the lease does not exist. It may be
// called any number of times, from any goroutine, and always gives the
// same answer; it never starts or cancels the commit, which runs whether
// or not anyone waits.
func (r *Reservation) Wait() error {
	failpoint("lease-awaited")
	<-r.done
	return r.err
}

// reservations holds the leases reserved in memory and not yet committed.
type reservations struct {
	mu sync.Mutex
	// byClone is each pending reservation by its clone ID: at most one
	// per clone ID, so a second acquisition of one waits for the first.
	byClone map[string]*Reservation
	// seq is the last fencing sequence number granted; 0 until read from
	// the index by the first reservation. Reservations take the numbers
	// in memory so that a create can answer with its inode at once.
	seq uint64
	// commits counts the commits in flight: Close waits for them.
	commits sync.WaitGroup
}

// pending returns the pending reservation of cloneID, or nil.
func (rs *reservations) pending(cloneID string) *Reservation {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.byClone[cloneID]
}

// awaitClone waits for the commit of a pending reservation of cloneID, if
// there is one, so that what the caller reads next is its outcome.
func (s *Store) awaitClone(cloneID string) {
	if r := s.reserved.pending(cloneID); r != nil {
		<-r.done
	}
}

// awaitLaunch waits for the commit of a pending reservation whose launch
// ID is launch, if there is one (BindLaunched: a clone started with the
// launch ID its creator read from the create's handle).
func (s *Store) awaitLaunch(launch string) {
	rs := &s.reserved
	rs.mu.Lock()
	var found *Reservation
	for _, r := range rs.byClone {
		if r.Lease.LaunchID == launch {
			found = r
			break
		}
	}
	rs.mu.Unlock()
	if found != nil {
		<-found.done
	}
}

// reserve is the one acquisition path: it validates cloneID, draws a
// launch ID, reads the host facts, and in one read transaction, after
// any pending reservation of cloneID has ended, returns the clone's
// existing lease if route.held accepts it (Created false, nothing to
// commit) or grants a Reserved lease on the generation route.choose
// picks, with the next fencing sequence number. A grant is registered as
// pending and its record committed through update by a goroutine of its
// own (commitReservation), so reserve returns without waiting for any
// fsync. Errors: as AcquireLease, and ErrReadOnly.
func (s *Store) reserve(update func(func(*bolt.Tx) error) error, cloneID string, route acquireRoute) (r *Reservation, err error) {
	start := time.Now()
	defer func() {
		if err != nil || !r.Created { // else commitReservation reports it
			s.observer().LeaseOp("create", time.Since(start), err)
		}
	}()
	if err := ValidateCloneID(cloneID); err != nil {
		return nil, err
	}
	launch, err := newLaunchID()
	if err != nil {
		return nil, err
	}
	facts, factsErr := s.host.Facts()
	rs := &s.reserved
	for {
		rs.mu.Lock()
		if p := rs.byClone[cloneID]; p != nil {
			rs.mu.Unlock()
			<-p.done
			continue
		}
		r, err := s.grant(cloneID, launch, facts, factsErr, route)
		if err != nil || !r.Created {
			rs.mu.Unlock()
			return r, err
		}
		rs.byClone[cloneID] = r
		rs.commits.Add(1)
		rs.mu.Unlock()
		go s.commitReservation(update, r, route.key, facts, start)
		return r, nil
	}
}

// grant decides a reservation of cloneID in one read transaction; the
// caller holds s.reserved.mu, and no reservation of cloneID is pending.
func (s *Store) grant(cloneID, launch string, facts HostFacts, factsErr error, route acquireRoute) (*Reservation, error) {
	if err := s.ReadOnly(); err != nil {
		return nil, err
	}
	var r *Reservation
	err := s.db.View(func(tx *bolt.Tx) error {
		existing, err := readLeaseTx(tx, cloneID)
		switch {
		case err == nil:
			if err := route.held(existing); err != nil {
				return err
			}
			r = &Reservation{Lease: existing, done: closedDone}
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		g, err := route.choose(tx, facts, factsErr)
		if err != nil {
			return err
		}
		rs := &s.reserved
		if rs.seq == 0 {
			rs.seq = tx.Bucket(bucketLeases).Sequence()
		}
		rs.seq++
		r = &Reservation{Lease: s.newLease(g, cloneID, launch, rs.seq), Created: true, done: make(chan struct{})}
		return nil
	})
	return r, err
}

// closedDone is the done channel of a reservation with nothing to commit.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// commitReservation writes r's record through update, checking in the
// same transaction that its generation still exists and may still get a
// new lease under the host facts the grant used (a tombstone, retirement
// or retire that committed since the grant refuses it: the commit fails
// with that error). Then it ends r: the lease is logged and emitted if
// committed, the create begun at start is reported to the Observer, r
// leaves the pending set, and Wait returns.
func (s *Store) commitReservation(update func(func(*bolt.Tx) error) error, r *Reservation, key string, facts HostFacts, start time.Time) {
	rs := &s.reserved
	defer rs.commits.Done()
	l := r.Lease
	err := update(func(tx *bolt.Tx) error {
		if _, err := readLeaseTx(tx, l.CloneID); !errors.Is(err, ErrNotFound) {
			if err == nil {
				err = fmt.Errorf("lease %q: a record appeared before its commit: %w", l.CloneID, ErrLeaseConflict)
			}
			return err
		}
		g, err := getGeneration(tx, l.Generation)
		if err == nil {
			err = checkEligible(tx, g, facts, nil)
		}
		if err != nil {
			return fmt.Errorf("lease %q, granted on %s, refused at its commit: %w", l.CloneID, l.Generation, err)
		}
		return s.insertLease(tx, l)
	})
	if err == nil {
		failpoint("lease-committed")
		attrs := []any{"clone", l.CloneID}
		if key != "" {
			attrs = append(attrs, "key", key)
		}
		s.log.Info("lease acquired", append(attrs, "generation", l.Generation.String(), "seq", l.Seq)...)
		s.emit(Event{Kind: EventLeaseCreated, Generation: l.Generation, KeyID: l.KeyID, CloneID: l.CloneID, LeaseSeq: l.Seq})
	} else {
		s.log.Warn("lease not committed; its create is refused at close", "clone", l.CloneID, "generation", l.Generation.String(), "seq", l.Seq, "err", err)
	}
	s.observer().LeaseOp("create", time.Since(start), err)
	rs.mu.Lock()
	delete(rs.byClone, l.CloneID)
	rs.mu.Unlock()
	r.err = err
	close(r.done)
}
