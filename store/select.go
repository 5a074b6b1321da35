package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
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
// retiring) and eligible (Eligibility), in one bbolt transaction; the lease
// record names the generation chosen. Nothing falls back to an ineligible
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
// why), the host's read error. Like AcquireLease it commits in a group
// shared with concurrent acquisitions and returns once its record is
// durable.
func (s *Store) AcquireLeaseByKey(keyID, cloneID string) (lease Lease, created bool, err error) {
	if err := ValidateKeyID(keyID); err != nil {
		return Lease{}, false, err
	}
	if err := ValidateCloneID(cloneID); err != nil {
		return Lease{}, false, err
	}
	launch, err := newLaunchID()
	if err != nil {
		return Lease{}, false, err
	}
	facts, factsErr := s.host.Facts()
	err = s.commits.update(func(tx *bolt.Tx) error {
		found, err := getJSON(tx.Bucket(bucketLeases), []byte(cloneID), &lease)
		if err != nil {
			return err
		}
		if found {
			if lease.KeyID != keyID {
				return fmt.Errorf("lease %q is on generation %s of key %s, not key %s: %w", cloneID, lease.Generation, lease.KeyID, keyID, ErrLeaseConflict)
			}
			return errUnchanged
		}
		if factsErr != nil {
			return fmt.Errorf("lease %q on key %s: read host facts: %w", cloneID, keyID, factsErr)
		}
		set, err := readSettings(tx)
		if err != nil {
			return err
		}
		kg := tx.Bucket(bucketKeyGenerations).Bucket([]byte(keyID))
		if kg == nil {
			return fmt.Errorf("key %s: %w", keyID, ErrNotFound)
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
				return err
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
			lease, err = s.grantLease(tx, newest, cloneID, launch)
			return err
		}
		if len(why) == 0 {
			return fmt.Errorf("lease %q on key %s: %w: every generation of the key has been retired", cloneID, keyID, ErrIneligible)
		}
		if n := len(why); n > maxReasons {
			why = append(why[:maxReasons], fmt.Sprintf("and %d older", n-maxReasons))
		}
		return fmt.Errorf("lease %q on key %s: %w: no eligible generation: %s", cloneID, keyID, ErrIneligible, strings.Join(why, "; "))
	})
	switch {
	case errors.Is(err, errUnchanged):
		return lease, false, nil
	case err != nil:
		return Lease{}, false, err
	}
	failpoint("lease-committed")
	s.log.Info("lease acquired", "clone", cloneID, "key", keyID, "generation", lease.Generation.String(), "seq", lease.Seq)
	s.emit(Event{Kind: EventLeaseCreated, Generation: lease.Generation, KeyID: keyID, CloneID: cloneID, LeaseSeq: lease.Seq})
	return lease, true, nil
}

// leasable refuses a generation that may not get new leases by state.
func leasable(g Generation) error {
	switch g.State {
	case Published:
		return nil
	case Retiring:
		return fmt.Errorf("generation %s: %w", g.ID, ErrRetiring)
	default:
		return fmt.Errorf("generation %s: %w", g.ID, ErrTombstoned)
	}
}

// checkEligible refuses g unless it may get a new lease now: published
// (leasable) and inside its restore window (evaluate).
func checkEligible(tx *bolt.Tx, g Generation, facts HostFacts, factsErr error) error {
	if err := leasable(g); err != nil {
		return err
	}
	if factsErr != nil {
		return fmt.Errorf("read host facts: %w", factsErr)
	}
	set, err := readSettings(tx)
	if err != nil {
		return err
	}
	if e := evaluate(g.Anchors, facts, set); !e.Eligible {
		return fmt.Errorf("generation %s: %w: %s", g.ID, ErrIneligible, e.detail())
	}
	return nil
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
