package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// AcquireLease grants clone cloneID a lease on generation gen in one bbolt
// transaction: it checks that the generation exists, is published and is
// eligible (Eligibility, from host facts read just before the
// transaction), assigns the next fencing sequence number and a random
// 16-byte launch ID, and commits the record in state Reserved before
// returning. created reports whether this call made the lease: a retry
// with the same clone ID and generation returns the existing lease
// unchanged (created false), even if the generation has since been
// tombstoned or become ineligible. Errors: ErrInvalidID (clone ID, see
// ValidateCloneID), ErrNotFound (generation), ErrLeaseConflict (the clone
// holds a lease on another generation), ErrTombstoned, ErrRetiring,
// ErrIneligible (the message gives the reason), the host's read error.
//
// The transaction is a group commit shared with concurrent acquisitions
// (groupCommitter): it returns once its own record is durable.
func (s *Store) AcquireLease(gen GenerationID, cloneID string) (lease Lease, created bool, err error) {
	return s.acquireLease(gen, cloneID, s.commits.update)
}

// acquireLease is AcquireLease committing through update: the group
// committer, or bolt.DB.Update as the serial baseline benchmarks compare
// it with.
func (s *Store) acquireLease(gen GenerationID, cloneID string, update func(func(*bolt.Tx) error) error) (lease Lease, created bool, err error) {
	return s.acquire(update, cloneID, acquireRoute{
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
	})
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

// acquire is the one acquisition path, committing through update: it
// validates cloneID, draws a launch ID, reads the host facts, and in one
// transaction returns the clone's existing lease if route.held accepts it
// (created false), else grants a Reserved lease on the generation
// route.choose picks. Once the record is durable it logs and emits
// lease-created.
func (s *Store) acquire(update func(func(*bolt.Tx) error) error, cloneID string, route acquireRoute) (lease Lease, created bool, err error) {
	defer s.observeLeaseOp("create", time.Now(), &err)
	if err := ValidateCloneID(cloneID); err != nil {
		return Lease{}, false, err
	}
	launch, err := newLaunchID()
	if err != nil {
		return Lease{}, false, err
	}
	facts, factsErr := s.host.Facts()
	err = update(func(tx *bolt.Tx) error {
		found, err := getJSON(tx.Bucket(bucketLeases), []byte(cloneID), &lease)
		if err != nil {
			return err
		}
		if found {
			if err := route.held(lease); err != nil {
				return err
			}
			return errUnchanged
		}
		g, err := route.choose(tx, facts, factsErr)
		if err != nil {
			return err
		}
		lease, err = s.grantLease(tx, g, cloneID, launch)
		return err
	})
	switch {
	case errors.Is(err, errUnchanged):
		return lease, false, nil
	case err != nil:
		return Lease{}, false, err
	}
	failpoint("lease-committed")
	attrs := []any{"clone", cloneID}
	if route.key != "" {
		attrs = append(attrs, "key", route.key)
	}
	s.log.Info("lease acquired", append(attrs, "generation", lease.Generation.String(), "seq", lease.Seq)...)
	s.emit(Event{Kind: EventLeaseCreated, Generation: lease.Generation, KeyID: lease.KeyID, CloneID: cloneID, LeaseSeq: lease.Seq})
	return lease, true, nil
}

// grantLease writes a new Reserved lease of cloneID on g and its index
// row, assigning the next fencing sequence number.
func (s *Store) grantLease(tx *bolt.Tx, g Generation, cloneID, launch string) (Lease, error) {
	leases := tx.Bucket(bucketLeases)
	seq, err := leases.NextSequence()
	if err != nil {
		return Lease{}, err
	}
	lease := Lease{
		CloneID:    cloneID,
		Generation: g.ID,
		KeyID:      g.KeyID,
		Seq:        seq,
		LaunchID:   launch,
		CreatedAt:  s.now().UTC(),
		State:      Reserved,
	}
	if err := putJSON(leases, []byte(cloneID), lease); err != nil {
		return Lease{}, err
	}
	s.countLease(tx, "", Reserved)
	gl, err := tx.Bucket(bucketGenerationLeases).CreateBucketIfNotExists(genKey(g.ID))
	if err != nil {
		return Lease{}, err
	}
	if err := gl.Put([]byte(cloneID), nil); err != nil {
		return Lease{}, err
	}
	return lease, s.leasesChanged(tx, g.ID)
}

// newLaunchID returns 16 random bytes as lowercase hex.
func newLaunchID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("launch ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
