package store

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Every read and write of a lease row goes through this file (getLease,
// putLease, decodeLeaseRow, deleteLeaseRecord); the row's encoding is
// leasecodec.go's.

// readLeaseTx reads the lease of cloneID in tx. Errors: ErrNotFound, a
// record that does not decode.
func readLeaseTx(tx *bolt.Tx, cloneID string) (Lease, error) {
	lease, found, err := getLease(tx.Bucket(bucketLeases), []byte(cloneID))
	if err == nil && !found {
		err = fmt.Errorf("lease %q: %w", cloneID, ErrNotFound)
	}
	return lease, err
}

// getLease reads the row of cloneID from the leases bucket b; found is
// false when there is none. Errors: a row that does not decode.
func getLease(b *bolt.Bucket, cloneID []byte) (lease Lease, found bool, err error) {
	row := b.Get(cloneID)
	if row == nil {
		return Lease{}, false, nil
	}
	lease, err = decodeLeaseRow(cloneID, row)
	return lease, true, err
}

// decodeLeaseRow decodes a row of the leases bucket, naming its key in
// the error.
func decodeLeaseRow(cloneID, row []byte) (Lease, error) {
	l, err := decodeLease(cloneID, row)
	if err != nil {
		return Lease{}, fmt.Errorf("decode lease row %q: %w", cloneID, err)
	}
	return l, nil
}

// putLease writes lease's row, keyed by its clone ID, into tx's leases
// bucket (its pages filled as appendFills says).
func (s *Store) putLease(tx *bolt.Tx, lease Lease) error {
	s.db.fills.put(tx.Bucket(bucketLeases), []byte(lease.CloneID))
	return writeLeaseRow(tx, lease)
}

// writeLeaseRow puts lease's row, keyed by its clone ID, into tx's
// leases bucket, and lists it in tracked_leases/ if exit tracking
// watches it (tracked), or unlists it.
func writeLeaseRow(tx *bolt.Tx, lease Lease) error {
	row, err := encodeLease(lease)
	if err != nil {
		return err
	}
	key := []byte(lease.CloneID)
	if err := tx.Bucket(bucketLeases).Put(key, row); err != nil {
		return err
	}
	if tracked(lease) {
		return tx.Bucket(bucketTrackedLeases).Put(key, nil)
	}
	return tx.Bucket(bucketTrackedLeases).Delete(key)
}

// indexLease lists lease under its generation in generation_leases,
// making the generation's bucket if it has none.
func (s *Store) indexLease(tx *bolt.Tx, lease Lease) error {
	gl, err := tx.Bucket(bucketGenerationLeases).CreateBucketIfNotExists(genKey(lease.Generation))
	if err != nil {
		return err
	}
	key := []byte(lease.CloneID)
	return s.db.fills.put(gl, key).Put(key, nil)
}

// sameSeq refuses, with ErrNotFound, a caller that names lease l by its
// clone ID and the fencing sequence number seq when l has another one:
// the lease the caller meant was released and the clone ID acquired
// again, and l, the newer lease, must be left alone. Seq zero names
// whichever lease the clone holds.
func (l Lease) sameSeq(seq uint64) error {
	if seq == 0 || l.Seq == seq {
		return nil
	}
	return fmt.Errorf("lease %q has sequence %d, not %d (released and acquired again): %w", l.CloneID, l.Seq, seq, ErrNotFound)
}

// casLeaseState writes state and UpdatedAt into the lease of
// which.CloneID if it is still the same lease (same Seq), is neither
// Reserved nor Exited (its process has exited: that is final) and, when
// from is not empty, is in state from. Otherwise a concurrent
// release, kill or rebind changed it, and it is left alone.
func (s *Store) casLeaseState(which Lease, from, state LeaseState) error {
	return s.changeSameLease(faultLeaseState, which, func(tx *bolt.Tx, lease Lease) error {
		if lease.State == Reserved || lease.State == Exited || lease.State == state || from != "" && lease.State != from {
			return errUnchanged
		}
		s.countLease(tx, lease.State, state)
		lease.State, lease.UpdatedAt = state, s.now().UTC()
		return s.putLease(tx, lease)
	})
}

// changeSameLease applies change, in one transaction committed with
// error point p, to the lease record of which.CloneID if it is still that
// lease (same Seq). A lease gone or replaced meanwhile (released, or the
// clone ID acquired again) is left alone and nil returned; so is one
// change leaves as it is by returning errUnchanged.
func (s *Store) changeSameLease(p faultPoint, which Lease, change func(tx *bolt.Tx, lease Lease) error) error {
	err := s.update(p, func(tx *bolt.Tx) error {
		lease, err := readLeaseTx(tx, which.CloneID)
		if errors.Is(err, ErrNotFound) {
			return errUnchanged
		}
		if err != nil {
			return err
		}
		if lease.Seq != which.Seq {
			return errUnchanged
		}
		return change(tx, lease)
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
	s.countLease(tx, lease.State, "")
	if err := tx.Bucket(bucketTrackedLeases).Delete([]byte(lease.CloneID)); err != nil {
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
