package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Tombstone quarantines generation gen: in one transaction it sets the
// state to Tombstoned and records the time and the caller's uid. New
// leases are refused from then on; granted leases keep working. It is
// idempotent: tombstoning a tombstoned or retiring generation returns its
// record unchanged. With Options.Fleet the same transaction queues the
// tombstone for the fleet (QueueFleet). Errors: ErrNotFound.
func (s *Store) Tombstone(gen GenerationID, uid uint32) (Generation, error) {
	return s.tombstone(gen, uid, s.queueFor(true, uid))
}

// tombstone is Tombstone, with queue (if not nil) run in its transaction
// once the state has changed.
func (s *Store) tombstone(gen GenerationID, uid uint32, queue func(*bolt.Tx, *Generation) error) (Generation, error) {
	g, changed, err := s.changeGeneration(faultTombstoneCommit, gen, queue, func(g *Generation) error {
		if g.State != Published {
			return errUnchanged
		}
		g.State = Tombstoned
		g.Tombstone = &Tombstone{At: s.now().UTC(), UID: uid}
		return nil
	})
	if changed {
		failpoint("tombstone-committed")
		s.log.Info("generation tombstoned", "generation", gen.String(), "uid", uid)
		s.emit(Event{Kind: EventTombstoned, Generation: gen, KeyID: g.KeyID})
	}
	return g, err
}

// Lift ends the quarantine of a tombstoned generation: in one transaction
// it sets the state back to Published and clears the tombstone record, so
// new leases may be granted again (eligibility still applies). Lifting a
// published generation changes nothing and returns its record. Errors:
// ErrNotFound, ErrRetiring. With Options.Fleet the same transaction
// queues the lift for the fleet (QueueFleet); the caller's uid is not
// known here, so the queued lift names the daemon's.
func (s *Store) Lift(gen GenerationID) (Generation, error) {
	return s.lift(gen, s.queueFor(false, uint32(s.uid)))
}

// lift is Lift, with queue (if not nil) run in its transaction once the
// state has changed.
func (s *Store) lift(gen GenerationID, queue func(*bolt.Tx, *Generation) error) (Generation, error) {
	g, changed, err := s.changeGeneration(faultLiftCommit, gen, queue, func(g *Generation) error {
		switch g.State {
		case Published:
			return errUnchanged
		case Retiring:
			return fmt.Errorf("lift %s: %w", gen, ErrRetiring)
		}
		g.State = Published
		g.Tombstone = nil
		return nil
	})
	if changed {
		failpoint("lift-committed")
		s.log.Info("tombstone lifted", "generation", gen.String())
		s.emit(Event{Kind: EventLifted, Generation: gen, KeyID: g.KeyID})
	}
	return g, err
}

// Retire records, in one transaction, the intent to delete tombstoned
// generation gen (state Retiring, time and uid), then deletes it at once
// if it holds no leases; otherwise the release or exit of its last lease
// does.
// Deletion removes the generation record and its index rows in one
// transaction, then the payload directory (deletes go metadata first: a
// crash leaves an orphaned payload, which Open removes, never a record
// without its payload). Open resumes a retirement interrupted by a crash.
// Retiring a retiring generation returns its record unchanged and retries
// a pending deletion. A deletion that fails after the intent committed is
// logged, not returned: the intent stands and Open or Check (Repair)
// finishes it. Publication IDs are never reused. Errors: ErrNotFound,
// ErrNotTombstoned (the generation is published).
func (s *Store) Retire(gen GenerationID, uid uint32) (Generation, error) {
	g, changed, err := s.changeGeneration(faultRetireIntent, gen, nil, func(g *Generation) error {
		switch g.State {
		case Retiring:
			return errUnchanged
		case Published:
			return fmt.Errorf("retire %s: %w", gen, ErrNotTombstoned)
		}
		g.State = Retiring
		g.Retirement = &RetirementIntent{At: s.now().UTC(), UID: uid}
		return nil
	})
	if err != nil {
		return Generation{}, err
	}
	if changed {
		failpoint("retire-intent-committed")
		s.log.Info("generation retiring", "generation", gen.String(), "uid", uid)
		s.emit(Event{Kind: EventRetirementStarted, Generation: gen, KeyID: g.KeyID})
	}
	s.afterLeaseRemoved(gen)
	return g, nil
}

// changeGeneration applies change to generation gen's record in one
// transaction and commits the result. change returns errUnchanged to keep
// the record as it is (nothing is written; changed is false) or another
// error to refuse (nothing is written; that error is returned). On success
// or errUnchanged it returns the record as stored. Errors: ErrNotFound,
// change's own, queue's, a failed commit's (at error point p). queue, if
// not nil, runs in the same transaction after a change, with the changed
// record.
func (s *Store) changeGeneration(p faultPoint, gen GenerationID, queue func(*bolt.Tx, *Generation) error, change func(*Generation) error) (g Generation, changed bool, err error) {
	err = s.update(p, func(tx *bolt.Tx) error {
		var err error
		if g, err = getGeneration(tx, gen); err != nil {
			return err
		}
		before := g.State
		if err := change(&g); err != nil {
			return err
		}
		s.countGeneration(tx, before, g.State)
		g.StateChangedAt = s.now().UTC()
		if queue != nil {
			if err := queue(tx, &g); err != nil {
				return err
			}
		}
		return putJSON(tx.Bucket(bucketGenerations), genKey(gen), g)
	})
	switch {
	case errors.Is(err, errUnchanged):
		return g, false, nil
	case err != nil:
		return Generation{}, false, err
	}
	return g, true, nil
}

// afterLeaseRemoved must be called after every committed transaction that
// removed a lease record of generation gen (ReleaseLease and the like) or
// made one Exited (exit tracking), outside any transaction and without
// holding s.maint, which it takes. If gen is retiring and now holds no
// leases (hasLeases), it finishes the retirement; a failure is logged,
// and Open or Check (Repair) resumes it.
func (s *Store) afterLeaseRemoved(gen GenerationID) {
	s.maint.Lock()
	defer s.maint.Unlock()
	if err := s.finishRetirement(gen); err != nil {
		s.log.Error("retirement not finished; it resumes at the next open", "generation", gen.String(), "err", err)
	}
}

// finishRetirement deletes gen if it is retiring and holds no leases: the
// record and index rows in one transaction, then payload/<gen>/ and an
// fsync of payload/. The caller holds s.maint.
func (s *Store) finishRetirement(gen GenerationID) error {
	err := s.update(faultRetireDelete, func(tx *bolt.Tx) error {
		g, err := getGeneration(tx, gen)
		if err != nil {
			return err
		}
		if g.State != Retiring || hasLeases(tx, gen) {
			return errUnchanged
		}
		s.countGeneration(tx, g.State, "")
		return deleteGeneration(tx, g, s.now().UTC())
	})
	switch {
	case errors.Is(err, errUnchanged) || errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("retire %s: delete record: %w", gen, err)
	}
	failpoint("retire-record-deleted")
	s.log.Info("generation retired", "generation", gen.String())
	s.emit(Event{Kind: EventRetirementFinished, Generation: gen})
	if err := s.readOnlyAfterSync(s.removePayload(gen.String())); err != nil {
		return fmt.Errorf("retire %s: %w", gen, err)
	}
	failpoint("retire-payload-deleted")
	return nil
}

// removePayload removes payload/<name> and fsyncs payload/. A failed
// fsync is a *syncError.
func (s *Store) removePayload(name string) error {
	payload := filepath.Join(s.dir, PayloadDir)
	if err := removeAt(faultRetireRemove, filepath.Join(payload, name)); err != nil {
		return err
	}
	return syncDirAt(faultRetireFsync, payload)
}

// resumeRetirements finishes every retirement whose generation holds no
// leases: those a crash interrupted between the intent (or the last
// release) and the deletion.
func (s *Store) resumeRetirements() error {
	var pending []GenerationID
	err := s.db.View(func(tx *bolt.Tx) error {
		return forEachGeneration(tx, func(g Generation) error {
			if g.State == Retiring && !hasLeases(tx, g.ID) {
				pending = append(pending, g.ID)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	s.maint.Lock()
	defer s.maint.Unlock()
	for _, gen := range pending {
		s.log.Info("resuming retirement", "generation", gen.String())
		if err := s.finishRetirement(gen); err != nil {
			return err
		}
	}
	return nil
}

// hasLeases reports whether a lease generation_leases lists on gen still
// holds it: any but an Exited lease of gen. A row whose lease is missing,
// undecodable or on another generation counts as holding: nothing is
// deleted on a guess (Check reports such rows). The walk stops at the
// first holding lease.
func hasLeases(tx *bolt.Tx, gen GenerationID) bool {
	gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(gen))
	if gl == nil {
		return false
	}
	leases := tx.Bucket(bucketLeases)
	c := gl.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if l, found, err := getLease(leases, k); err != nil || !found || l.Generation != gen || l.State != Exited {
			return true
		}
	}
	return false
}

// deleteGeneration removes g's record, its key_generations row and its
// generation_leases bucket (empty, or listing Exited leases only, which
// stay in leases/ until released), and records now as the key's
// GenerationRemovedAt. The key record stays: key sequence numbers are
// stable inode sources.
func deleteGeneration(tx *bolt.Tx, g Generation, now time.Time) error {
	if err := tx.Bucket(bucketGenerations).Delete(genKey(g.ID)); err != nil {
		return err
	}
	var k KeyRecord
	if found, err := getJSON(tx.Bucket(bucketKeys), []byte(g.KeyID), &k); err != nil {
		return err
	} else if found {
		k.GenerationRemovedAt = now
		if err := putJSON(tx.Bucket(bucketKeys), []byte(g.KeyID), k); err != nil {
			return err
		}
	}
	if kg := tx.Bucket(bucketKeyGenerations).Bucket([]byte(g.KeyID)); kg != nil {
		if err := kg.Delete(genKey(g.ID)); err != nil {
			return err
		}
	}
	if gls := tx.Bucket(bucketGenerationLeases); gls.Bucket(genKey(g.ID)) != nil {
		return gls.DeleteBucket(genKey(g.ID))
	}
	return nil
}
