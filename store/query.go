package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

func getGeneration(tx *bolt.Tx, id GenerationID) (Generation, error) {
	key := genKey(id)
	raw := tx.Bucket(bucketGenerations).Get(key)
	if raw == nil {
		return Generation{}, fmt.Errorf("generation %s: %w", id, ErrNotFound)
	}
	return decodedGenerations.decode(key, raw)
}

// Generation returns the record of generation id, or ErrNotFound.
func (s *Store) Generation(id GenerationID) (Generation, error) {
	var g Generation
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		g, err = getGeneration(tx, id)
		return err
	})
	return g, err
}

// Generations returns every generation record, oldest first.
func (s *Store) Generations() ([]Generation, error) {
	var out []Generation
	err := s.db.View(func(tx *bolt.Tx) error {
		return forEachGeneration(tx, func(g Generation) error {
			out = append(out, g)
			return nil
		})
	})
	return out, err
}

// forEachGeneration passes every generation record in tx to fn, oldest
// first. A record that does not decode, or an error of fn, ends the walk
// and is returned.
func forEachGeneration(tx *bolt.Tx, fn func(Generation) error) error {
	b := tx.Bucket(bucketGenerations)
	return b.ForEach(func(k, _ []byte) error {
		var g Generation
		if _, err := getJSON(b, k, &g); err != nil {
			return err
		}
		return fn(g)
	})
}

// Key returns the record of key keyID, or ErrNotFound (ErrInvalidID for a
// malformed ID).
func (s *Store) Key(keyID string) (KeyRecord, error) {
	if err := ValidateKeyID(keyID); err != nil {
		return KeyRecord{}, err
	}
	var k KeyRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		found, err := getJSON(tx.Bucket(bucketKeys), []byte(keyID), &k)
		if err == nil && !found {
			err = fmt.Errorf("key %s: %w", keyID, ErrNotFound)
		}
		return err
	})
	return k, err
}

// Keys returns every key record, ordered by key ID.
func (s *Store) Keys() ([]KeyRecord, error) {
	var out []KeyRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		return b.ForEach(func(k, _ []byte) error {
			var rec KeyRecord
			if _, err := getJSON(b, k, &rec); err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	return out, err
}

// KeyGenerations returns the IDs of the generations published under keyID,
// newest first, in any state. Errors: ErrInvalidID, ErrNotFound.
func (s *Store) KeyGenerations(keyID string) ([]GenerationID, error) {
	if err := ValidateKeyID(keyID); err != nil {
		return nil, err
	}
	var out []GenerationID
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKeyGenerations).Bucket([]byte(keyID))
		if b == nil {
			return fmt.Errorf("key %s: %w", keyID, ErrNotFound)
		}
		c := b.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			out = append(out, GenerationID(binary.BigEndian.Uint64(k)))
		}
		return nil
	})
	return out, err
}

// Lease returns the lease of cloneID, or ErrNotFound (ErrInvalidID for a
// malformed clone ID). A reservation of cloneID whose commit is running
// (Reservation) is waited for first, so the answer is its outcome.
func (s *Store) Lease(cloneID string) (Lease, error) {
	if err := ValidateCloneID(cloneID); err != nil {
		return Lease{}, err
	}
	s.awaitClone(cloneID)
	var l Lease
	err := s.db.View(func(tx *bolt.Tx) error {
		var found bool
		var err error
		l, found, err = getLease(tx.Bucket(bucketLeases), []byte(cloneID))
		if err == nil && !found {
			err = fmt.Errorf("lease %q: %w", cloneID, ErrNotFound)
		}
		return err
	})
	return l, err
}

// Leases returns every lease, ordered by clone ID.
func (s *Store) Leases() ([]Lease, error) {
	var out []Lease
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLeases)
		return b.ForEach(func(k, _ []byte) error {
			l, _, err := getLease(b, k)
			if err != nil {
				return err
			}
			out = append(out, l)
			return nil
		})
	})
	return out, err
}

// GenerationLeases returns the leases held on generation gen, ordered by
// clone ID. A generation without leases gives an empty list; an unknown
// generation gives ErrNotFound.
func (s *Store) GenerationLeases(gen GenerationID) ([]Lease, error) {
	var out []Lease
	err := s.db.View(func(tx *bolt.Tx) error {
		if _, err := getGeneration(tx, gen); err != nil {
			return err
		}
		gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(gen))
		if gl == nil {
			return nil
		}
		leases := tx.Bucket(bucketLeases)
		return gl.ForEach(func(k, _ []byte) error {
			l, _, err := getLease(leases, k)
			if err != nil {
				return err
			}
			out = append(out, l)
			return nil
		})
	})
	return out, err
}

// OpenPayload opens artifact name of generation gen read-only, relative to
// the store's directory handle without following a symbolic link anywhere
// on the way (Linux openat2 RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH: ELOOP;
// Windows refuses a reparse point as the last component with
// ErrUnsafePath), and refuses a file with more than one hard link
// (ErrUnsafePath, also logged at error level). The caller closes the file. Errors: ErrNotFound for an
// unknown generation or artifact; the open error otherwise.
func (s *Store) OpenPayload(gen GenerationID, name string) (*os.File, error) {
	g, err := s.Generation(gen)
	if err != nil {
		return nil, err
	}
	if _, ok := g.Artifact(name); !ok {
		return nil, fmt.Errorf("generation %s has no artifact %q: %w", gen, name, ErrNotFound)
	}
	f, err := s.openPayloadFile(gen, name)
	if errors.Is(err, ErrUnsafePath) {
		s.log.Error("refusing unsafe payload file", "generation", gen.String(), "artifact", name, "err", err.Error())
	}
	return f, err
}
