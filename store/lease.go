package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// errUnchanged rolls back an Update that found nothing to write, so a
// retried call does not pay for a commit.
var errUnchanged = errors.New("unchanged")

// AcquireLease grants clone cloneID a lease on generation gen in one bbolt
// transaction: it checks that the generation exists and is not tombstoned,
// assigns the next fencing sequence number and a random 16-byte launch ID,
// and commits the record in state Reserved before returning. created
// reports whether this call made the lease: a retry with the same clone ID
// and generation returns the existing lease unchanged (created false), even
// if the generation has been tombstoned since. Errors: ErrInvalidID (clone
// ID, see ValidateCloneID), ErrNotFound (generation), ErrLeaseConflict (the
// clone holds a lease on another generation), ErrTombstoned.
func (s *Store) AcquireLease(gen GenerationID, cloneID string) (lease Lease, created bool, err error) {
	if err := ValidateCloneID(cloneID); err != nil {
		return Lease{}, false, err
	}
	var launch [16]byte
	if _, err := rand.Read(launch[:]); err != nil {
		return Lease{}, false, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		leases := tx.Bucket(bucketLeases)
		found, err := getJSON(leases, []byte(cloneID), &lease)
		if err != nil {
			return err
		}
		if found {
			if lease.Generation != gen {
				return fmt.Errorf("lease %q is on generation %s, not %s: %w", cloneID, lease.Generation, gen, ErrLeaseConflict)
			}
			return errUnchanged
		}
		g, err := getGeneration(tx, gen)
		if err != nil {
			return err
		}
		if g.State != Published {
			return fmt.Errorf("lease %q on generation %s: %w", cloneID, gen, ErrTombstoned)
		}
		seq, err := leases.NextSequence()
		if err != nil {
			return err
		}
		lease = Lease{
			CloneID:    cloneID,
			Generation: gen,
			KeyID:      g.KeyID,
			Seq:        seq,
			LaunchID:   hex.EncodeToString(launch[:]),
			CreatedAt:  s.now().UTC(),
			State:      Reserved,
		}
		if err := putJSON(leases, []byte(cloneID), lease); err != nil {
			return err
		}
		gl, err := tx.Bucket(bucketGenerationLeases).CreateBucketIfNotExists(genKey(gen))
		if err != nil {
			return err
		}
		return gl.Put([]byte(cloneID), nil)
	})
	switch {
	case errors.Is(err, errUnchanged):
		return lease, false, nil
	case err != nil:
		return Lease{}, false, err
	}
	failpoint("lease-committed")
	s.log.Info("lease acquired", "clone", cloneID, "generation", gen.String(), "seq", lease.Seq)
	return lease, true, nil
}

// ReleaseLease removes the lease of cloneID. A lease in state Reserved was
// never bound to a process, so its clone has verifiably not started and the
// release is immediate. Errors: ErrInvalidID, ErrNotFound.
func (s *Store) ReleaseLease(cloneID string) error {
	if err := ValidateCloneID(cloneID); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		leases := tx.Bucket(bucketLeases)
		var lease Lease
		found, err := getJSON(leases, []byte(cloneID), &lease)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("lease %q: %w", cloneID, ErrNotFound)
		}
		if err := leases.Delete([]byte(cloneID)); err != nil {
			return err
		}
		if gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(lease.Generation)); gl != nil {
			return gl.Delete([]byte(cloneID))
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.log.Info("lease released", "clone", cloneID)
	return nil
}

// Tombstone quarantines generation gen: in one transaction it sets the
// state to Tombstoned and records the time and the caller's uid. New
// leases are refused from then on; granted leases keep working. It is
// idempotent: tombstoning a tombstoned generation returns its record
// unchanged. Errors: ErrNotFound.
func (s *Store) Tombstone(gen GenerationID, uid uint32) (Generation, error) {
	var g Generation
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		if g, err = getGeneration(tx, gen); err != nil {
			return err
		}
		if g.State == Tombstoned {
			return errUnchanged
		}
		g.State = Tombstoned
		g.Tombstone = &Tombstone{At: s.now().UTC(), UID: uid}
		return putJSON(tx.Bucket(bucketGenerations), genKey(gen), g)
	})
	switch {
	case errors.Is(err, errUnchanged):
		return g, nil
	case err != nil:
		return Generation{}, err
	}
	failpoint("tombstone-committed")
	s.log.Info("generation tombstoned", "generation", gen.String(), "uid", uid)
	return g, nil
}
