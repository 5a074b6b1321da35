package store

import (
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// benchLeases is the store size the StateCounts benchmarks measure at.
const benchLeases = 100_000

// leaseStore returns a store holding n Reserved leases on one
// generation, granted 1000 to a transaction.
func leaseStore(b *testing.B, n int) *Store {
	b.Helper()
	st, g := openLeaseStore(b)
	for i := 0; i < n; {
		err := st.db.Update(func(tx *bolt.Tx) error {
			for end := min(i+1000, n); i < end; i++ {
				l := st.newLease(g, fmt.Sprintf("clone-%07d", i), "00000000000000000000000000000000", uint64(i+1))
				if err := st.putLease(tx, l); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkStateCountsWalk measures the first StateCounts of a daemon
// (the first scrape of MNT/metrics): one walk of every lease and
// generation record, at benchLeases leases.
func BenchmarkStateCountsWalk(b *testing.B) {
	st := leaseStore(b, benchLeases)
	for b.Loop() {
		st.counts.mu.Lock()
		st.counts.ready = false
		st.counts.mu.Unlock()
		if c, err := st.StateCounts(); err != nil || c.Leases[Reserved] != benchLeases {
			b.Fatalf("StateCounts = %v, %v; want %d reserved", c, err, benchLeases)
		}
	}
}

// BenchmarkStateCountsKept measures every later StateCounts (each later
// scrape), at benchLeases leases: counters kept from the commits, no
// index read.
func BenchmarkStateCountsKept(b *testing.B) {
	st := leaseStore(b, benchLeases)
	if _, err := st.StateCounts(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if c, err := st.StateCounts(); err != nil || c.Leases[Reserved] != benchLeases {
			b.Fatalf("StateCounts = %v, %v; want %d reserved", c, err, benchLeases)
		}
	}
}
