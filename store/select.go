package store

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// maxReasons bounds how many generations an ErrIneligible message from
// AcquireLeaseByKey lists.
const maxReasons = 8

// AcquireLeaseByKey grants clone cloneID a lease on the newest capture
// among the generations of key keyID that are published (not tombstoned or
// retiring) and eligible (Eligibility); the lease record names the
// generation chosen. Nothing falls back to an ineligible
// generation.
//
// Newest means youngest by the age eligibility measures, not last
// published: a capture of this host's boot is aged by the monotonic clock
// (RuleSameBoot), which no wall-clock step between two captures can
// reorder; any other by its UTC anchor (RuleUTC). One age per generation
// orders every mix of the two. Equal ages go to the later publication.
// Host facts are read once, just before the transaction. A retry with the
// same clone ID returns its existing lease unchanged (created false) if
// that lease is on a generation of keyID. Errors: ErrInvalidID (key or
// clone ID), ErrNotFound (unknown key, or a key with no generations left),
// ErrLeaseConflict (the clone holds a lease under another key),
// ErrIneligible (no generation qualifies; the message lists each one and
// why), the host's read error. Like AcquireLease it returns once its
// record is durable (ReserveLeaseByKey, then Reservation.Wait).
func (s *Store) AcquireLeaseByKey(keyID, cloneID string) (lease Lease, created bool, err error) {
	if err := ValidateKeyID(keyID); err != nil {
		return Lease{}, false, err
	}
	return s.acquire(s.commits.update, cloneID, keyRoute(keyID, cloneID))
}

// ReserveLeaseByKey is AcquireLeaseByKey without the wait for the commit,
// as ReserveLease is AcquireLease's (see Reservation): the generation is
// chosen, and the eligibility decided, in one read transaction, and the
// commit checks the chosen generation again. Errors: AcquireLeaseByKey's
// (ErrReadOnly too); the commit's come from Reservation.Wait.
func (s *Store) ReserveLeaseByKey(keyID, cloneID string) (*Reservation, error) {
	if err := ValidateKeyID(keyID); err != nil {
		return nil, err
	}
	return s.reserve(s.commits.update, cloneID, keyRoute(keyID, cloneID))
}

// keyRoute acquires cloneID on the newest eligible capture of key keyID.
func keyRoute(keyID, cloneID string) acquireRoute {
	return acquireRoute{
		key: keyID,
		held: func(l Lease) error {
			if l.KeyID != keyID {
				return fmt.Errorf("lease %q is on generation %s of key %s, not key %s: %w", cloneID, l.Generation, l.KeyID, keyID, ErrLeaseConflict)
			}
			return nil
		},
		choose: func(tx *bolt.Tx, facts HostFacts, factsErr error) (Generation, error) {
			return newestEligible(tx, keyID, cloneID, facts, factsErr)
		},
	}
}

// newestEligible picks the generation AcquireLeaseByKey grants cloneID a
// lease on: the youngest published and eligible generation of key keyID.
// Errors: ErrNotFound (no such key), ErrIneligible (the message lists
// each generation and why), the host facts' read error.
func newestEligible(tx *bolt.Tx, keyID, cloneID string, facts HostFacts, factsErr error) (Generation, error) {
	if factsErr != nil {
		return Generation{}, fmt.Errorf("lease %q on key %s: read host facts: %w", cloneID, keyID, factsErr)
	}
	set, err := readSettings(tx)
	if err != nil {
		return Generation{}, err
	}
	kg := tx.Bucket(bucketKeyGenerations).Bucket([]byte(keyID))
	if kg == nil {
		return Generation{}, fmt.Errorf("key %s: %w", keyID, ErrNotFound)
	}
	var (
		why      []string
		newest   Generation
		youngest time.Duration
		chosen   bool
	)
	c := kg.Cursor()
	// Last publication first, so that on equal ages it is kept.
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		g, err := getGeneration(tx, GenerationID(binary.BigEndian.Uint64(k)))
		if err != nil {
			return Generation{}, err
		}
		if err := leasable(g); err != nil {
			why = append(why, fmt.Sprintf("%s %s", g.ID, g.State))
			continue
		}
		e := evaluate(g.Anchors, facts, set)
		if !e.Eligible {
			why = append(why, fmt.Sprintf("%s %s", g.ID, e.Reason))
			continue
		}
		if !chosen || e.Age < youngest {
			newest, youngest, chosen = g, e.Age, true
		}
	}
	if chosen {
		return newest, nil
	}
	if len(why) == 0 {
		return Generation{}, fmt.Errorf("lease %q on key %s: %w: every generation of the key has been retired", cloneID, keyID, ErrIneligible)
	}
	if n := len(why); n > maxReasons {
		why = append(why[:maxReasons], fmt.Sprintf("and %d older", n-maxReasons))
	}
	return Generation{}, fmt.Errorf("lease %q on key %s: %w: no eligible generation: %s", cloneID, keyID, ErrIneligible, strings.Join(why, "; "))
}
