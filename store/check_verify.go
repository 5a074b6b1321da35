package store

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Verify re-hashes every artifact of the generations gens, or of every
// generation if gens is empty (holes read as zeros), and compares its
// SHA-256 with the record: the digest part of
// Check, for a scrub while the store is in use. It returns one Problem
// per artifact that differs (ProblemArtifactDigest, also for a file of
// another size), is missing (ProblemArtifactMissing) or has another hard
// link (ProblemArtifactLinks), in generation order; a clean store gives
// none. The generations are read in one transaction, then hashed without
// holding anything, so leases, publications and retirements proceed; a
// generation retired meanwhile is skipped. Verify changes nothing. The
// bytes hashed are reported to progress (which may be nil). It returns an
// error wrapping ErrNotFound for a generation of gens not in the store,
// and otherwise only when it cannot read the index or a payload file.
func (s *Store) Verify(gens []GenerationID, progress Progress) ([]Problem, error) {
	var jobs []digestJob
	add := func(tx *bolt.Tx, id GenerationID) error {
		g, err := getGeneration(tx, id)
		if err != nil {
			return err
		}
		for _, a := range g.Artifacts {
			jobs = append(jobs, digestJob{gen: g.ID, want: a})
		}
		return nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, id := range gens {
			if err := add(tx, id); err != nil {
				return err
			}
		}
		if len(gens) > 0 {
			return nil
		}
		return tx.Bucket(bucketGenerations).ForEach(func(k, _ []byte) error {
			if id, ok := genOf(k); ok { // Check reports other keys
				return add(tx, id)
			}
			return nil
		})
	})
	if errors.Is(err, ErrNotFound) {
		return nil, err // names the generation
	}
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	c := &checker{}
	if err := s.checkDigests(c, jobs, progress); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return c.problems, nil
}
