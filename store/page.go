package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Paged reads: each returns at most n records following a cursor key, in
// one read transaction, so a listing of 1,000,000 leases never holds more
// than a page in memory (project issue 5, "Lists scale"). A page shorter
// than n is the last one. Records added or removed between pages are seen
// or not, as with readdir(3) on any filesystem; none is returned twice.

// GenerationsAfter returns up to n generations with ID > after, by ID
// (after 0 starts at the first). Errors: a record that does not decode.
func (s *Store) GenerationsAfter(after GenerationID, n int) ([]Generation, error) {
	var out []Generation
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketGenerations).Cursor()
		for k, v := c.Seek(genKey(after + 1)); k != nil && len(out) < n; k, v = c.Next() {
			var g Generation
			if err := json.Unmarshal(v, &g); err != nil {
				return fmt.Errorf("decode generation row %x: %w", k, err)
			}
			out = append(out, g)
		}
		return nil
	})
	return out, err
}

// LeasesAfter returns up to n leases with clone ID > after (byte order),
// by clone ID ("" starts at the first). Errors: a record that does not
// decode.
func (s *Store) LeasesAfter(after string, n int) ([]Lease, error) {
	var out []Lease
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLeases).Cursor()
		for k, v := seekAfter(c, after); k != nil && len(out) < n; k, v = c.Next() {
			l, err := decodeLeaseRow(k, v)
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		return nil
	})
	return out, err
}

// GenerationLeasesAfter returns up to n leases held on gen with clone ID >
// after, by clone ID. Errors: ErrNotFound for an unknown generation, or a
// record that does not decode.
func (s *Store) GenerationLeasesAfter(gen GenerationID, after string, n int) ([]Lease, error) {
	var out []Lease
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketGenerations).Get(genKey(gen)) == nil {
			return fmt.Errorf("generation %s: %w", gen, ErrNotFound)
		}
		gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(gen))
		if gl == nil {
			return nil
		}
		leases := tx.Bucket(bucketLeases)
		c := gl.Cursor()
		for k, _ := seekAfter(c, after); k != nil && len(out) < n; k, _ = c.Next() {
			l, _, err := getLease(leases, k)
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		return nil
	})
	return out, err
}

// seekAfter positions c on the first key > after.
func seekAfter(c *bolt.Cursor, after string) (k, v []byte) {
	k, v = c.Seek([]byte(after))
	if k != nil && after != "" && string(k) == after {
		k, v = c.Next()
	}
	return k, v
}

// CreatedAt returns when the store was created (meta/created), reading
// one row: unlike Info it walks no bucket, so it costs the same with
// 1,000,000 leases as with none. Errors: a row that is not RFC 3339.
func (s *Store) CreatedAt() (time.Time, error) {
	var t time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketMeta).Get(keyCreated)
		var err error
		if t, err = time.Parse(time.RFC3339Nano, string(raw)); err != nil {
			return fmt.Errorf("meta row %q = %q: %w", keyCreated, raw, err)
		}
		return nil
	})
	return t, err
}
