package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// AcquireLease grants clone cloneID a lease on generation gen and returns
// once its record is durable: ReserveLease, then Reservation.Wait. created
// reports whether this call made the lease: a retry with the same clone
// ID and generation returns the existing lease unchanged (created false),
// even if the generation has since been tombstoned or become ineligible.
// Errors: ReserveLease's, and the commit's (Wait): then no lease exists.
func (s *Store) AcquireLease(gen GenerationID, cloneID string) (lease Lease, created bool, err error) {
	return s.acquireLease(gen, cloneID, s.commits.update)
}

// ReserveLease grants clone cloneID a lease on generation gen in memory
// and starts the group commit of its record, without waiting for it (see
// Reservation): it checks, in one read transaction, that the generation
// exists, is published and is eligible (Eligibility, from host facts read
// just before), assigns the next fencing sequence number and a random
// 16-byte launch ID, and returns the Reserved lease. The commit checks
// the generation again and writes the record; Reservation.Wait returns
// its outcome. A retry with the same clone ID and generation returns the
// existing lease (Created false, already durable). Errors: ErrInvalidID
// (clone ID, see ValidateCloneID), ErrNotFound (generation),
// ErrLeaseConflict (the clone holds a lease on another generation),
// ErrTombstoned, ErrRetiring, ErrIneligible (the message gives the
// reason), ErrReadOnly, the host's read error.
func (s *Store) ReserveLease(gen GenerationID, cloneID string) (*Reservation, error) {
	return s.reserve(s.commits.update, cloneID, generationRoute(gen, cloneID))
}

// acquireLease is AcquireLease committing through update: the group
// committer, or bolt.DB.Update as the serial baseline benchmarks compare
// it with.
func (s *Store) acquireLease(gen GenerationID, cloneID string, update func(func(*bolt.Tx) error) error) (lease Lease, created bool, err error) {
	return s.acquire(update, cloneID, generationRoute(gen, cloneID))
}

// generationRoute acquires cloneID on generation gen.
func generationRoute(gen GenerationID, cloneID string) acquireRoute {
	return acquireRoute{
		held: func(l Lease) error {
			if l.Generation != gen {
				return fmt.Errorf("lease %q is on generation %s, not %s: %w", cloneID, l.Generation, gen, ErrLeaseConflict)
			}
			return nil
		},
		choose: func(tx *bolt.Tx, facts HostFacts, factsErr error) (Generation, error) {
			g, err := getGeneration(tx, gen)
			if err != nil {
				return Generation{}, err
			}
			if err := checkEligible(tx, g, facts, factsErr); err != nil {
				return Generation{}, fmt.Errorf("lease %q: %w", cloneID, err)
			}
			return g, nil
		},
	}
}

// acquireRoute is how an acquisition names what it wants: a generation
// (AcquireLease) or a key (AcquireLeaseByKey).
type acquireRoute struct {
	// key is the key asked for, named in the log line; empty for a
	// generation.
	key string
	// held judges the lease the clone already holds: nil makes the call
	// a retry that returns it unchanged, an error (ErrLeaseConflict)
	// refuses.
	held func(Lease) error
	// choose picks the generation to grant the lease on, inside the
	// acquisition's transaction, from the host facts (or their read
	// error) read just before it; an error refuses.
	choose func(tx *bolt.Tx, facts HostFacts, factsErr error) (Generation, error)
}

// acquire reserves cloneID's lease along route (reserve), committing
// through update, and waits for the commit.
func (s *Store) acquire(update func(func(*bolt.Tx) error) error, cloneID string, route acquireRoute) (lease Lease, created bool, err error) {
	r, err := s.reserve(update, cloneID, route)
	if err != nil {
		return Lease{}, false, err
	}
	if err := r.Wait(); err != nil {
		return Lease{}, false, err
	}
	return r.Lease, r.Created, nil
}

// newLease is a new Reserved lease of cloneID on g with fencing sequence
// number seq and launch ID launch.
func (s *Store) newLease(g Generation, cloneID, launch string, seq uint64) Lease {
	return Lease{
		CloneID:    cloneID,
		Generation: g.ID,
		KeyID:      g.KeyID,
		Seq:        seq,
		LaunchID:   launch,
		CreatedAt:  s.now().UTC(),
		State:      Reserved,
	}
}

// insertLease writes the record of new lease l and its index row, and
// raises the leases bucket's sequence to l.Seq if it is below (the
// numbers are handed out in memory, reserve).
func (s *Store) insertLease(tx *bolt.Tx, l Lease) error {
	leases := tx.Bucket(bucketLeases)
	if leases.Sequence() < l.Seq {
		if err := leases.SetSequence(l.Seq); err != nil {
			return err
		}
	}
	if err := s.putLease(tx, l); err != nil {
		return err
	}
	s.countLease(tx, "", Reserved)
	if err := s.indexLease(tx, l); err != nil {
		return err
	}
	return s.leasesChanged(tx, l.Generation)
}

// newLaunchID returns 16 random bytes as lowercase hex.
func newLaunchID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("launch ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
