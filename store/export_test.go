package store

import bolt "go.etcd.io/bbolt"

// PutLeaseRow writes l's lease row in tx, for external tests that damage
// or rewrite an index with bbolt directly.
func PutLeaseRow(tx *bolt.Tx, l Lease) error { return writeLeaseRow(tx, l) }

// GetLeaseRow reads the lease row of cloneID in tx (ErrNotFound).
func GetLeaseRow(tx *bolt.Tx, cloneID string) (Lease, error) { return readLeaseTx(tx, cloneID) }
