package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Schema migration. Open brings an index written by an older build to
// SchemaVersion before it reads anything else, one step per version,
// each step durable and safe to interrupt at any commit:
//
//  1. The step's first commit writes the new version and
//     meta/migrating = the version migrated from, so an older build
//     refuses the half-migrated index (ErrSchemaTooNew) instead of
//     reading part of it.
//  2. The step moves rows in batches of migrateBatch, a commit each
//     (kill point migrate-batch-committed after each); a row is in its
//     old place or its new one at every commit, never both or neither.
//  3. Its last commit removes what is left of the old layout and
//     meta/migrating.
//
// An Open that finds meta/migrating resumes the step. A row a step
// cannot read makes Open refuse with ErrMigration, naming it; the
// index keeps every row it had, in one place or the other, and a build
// that can read the row (or a restore from backup) goes on. A new
// version adds its step to migrations.

// migrations[v] moves an index from version v to v+1.
var migrations = map[uint32]migrationStep{
	1: {name: "lease rows from JSON to binary (leases/ to lease_records/, tracked_leases/ made)", batch: migrateLeaseRows},
}

// migrationStep is one version's migration: batch moves up to n rows and
// reports done once none is left, after removing the old layout.
type migrationStep struct {
	name  string
	batch func(tx *bolt.Tx, n int) (done bool, err error)
}

// migrateBatch is how many rows a migration commit moves: large enough
// that 1,000,000 leases take about a hundred commits, small enough that
// a commit holds a few MiB of dirty pages.
const migrateBatch = 10000

// keyMigrating marks an index in the middle of a migration step; its
// value is the version migrated from (uint32 big-endian).
var keyMigrating = []byte("migrating")

// bucketLeasesV1 is schema version 1's leases/ bucket: JSON Lease rows
// keyed by clone ID.
var bucketLeasesV1 = []byte("leases")

// txRunner runs read and write transactions: the store's index, or a
// bolt.DB (Restore's adoptIndex).
type txRunner interface {
	View(func(*bolt.Tx) error) error
	Update(func(*bolt.Tx) error) error
}

// migrateIndex migrates the index db to SchemaVersion unless it is there
// already, logging each step with logf. readOnly refuses instead
// (ErrSchemaTooOld, saying how to migrate). Errors: ErrMigration for a
// row a step cannot read; the schema errors of checkSchema for an index
// that is no store, unversioned or newer.
func migrateIndex(db txRunner, readOnly bool, logf func(msg string, args ...any)) error {
	for {
		var from uint32
		var resuming bool
		if err := db.View(func(tx *bolt.Tx) error {
			var err error
			from, resuming, err = pendingMigration(tx)
			return err
		}); err != nil {
			return err
		}
		if from == SchemaVersion {
			return nil
		}
		step := migrations[from]
		if readOnly {
			return fmt.Errorf("schema version %d needs migrating to %d (%s), which changes the store: open it once with this build for changes (templatefs mount does): %w", from, SchemaVersion, step.name, ErrSchemaTooOld)
		}
		if resuming {
			logf("resuming index migration", "from", from, "to", from+1, "step", step.name)
		} else {
			logf("migrating index", "from", from, "to", from+1, "step", step.name)
		}
		moved := 0
		for done := false; !done; {
			if err := db.Update(func(tx *bolt.Tx) error {
				meta := tx.Bucket(bucketMeta)
				if err := meta.Put(keyVersion, binary.BigEndian.AppendUint32(nil, from+1)); err != nil {
					return err
				}
				if err := meta.Put(keyMigrating, binary.BigEndian.AppendUint32(nil, from)); err != nil {
					return err
				}
				var err error
				if done, err = step.batch(tx, migrateBatch); err != nil {
					return fmt.Errorf("migrate index from schema version %d: %w", from, err)
				}
				if done {
					return meta.Delete(keyMigrating)
				}
				return nil
			}); err != nil {
				return err
			}
			moved++
			failpoint("migrate-batch-committed")
		}
		logf("index migrated", "from", from, "to", from+1, "commits", moved)
	}
}

// pendingMigration returns the version to migrate from (SchemaVersion
// when none is due) and whether a step was interrupted. Errors: those of
// checkSchema for what no step reads.
func pendingMigration(tx *bolt.Tx) (from uint32, resuming bool, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, false, checkSchema(tx)
	}
	if m := meta.Get(keyMigrating); m != nil {
		if len(m) != 4 {
			return 0, false, fmt.Errorf("meta/migrating is %d bytes, want 4: %w", len(m), ErrSchemaUnknown)
		}
		from = binary.BigEndian.Uint32(m)
		if _, ok := migrations[from]; !ok {
			return 0, false, fmt.Errorf("meta/migrating names version %d, which this build does not migrate: %w", from, ErrSchemaUnknown)
		}
		return from, true, nil
	}
	v := meta.Get(keyVersion)
	if len(v) == 4 {
		if from = binary.BigEndian.Uint32(v); from < SchemaVersion {
			if _, ok := migrations[from]; ok {
				return from, false, nil
			}
		}
	}
	// Current, or what checkSchema refuses (its error names it).
	return SchemaVersion, false, checkSchema(tx)
}

// migrateLeaseRows moves up to n lease rows, in key order, from version
// 1's leases/ (JSON) to lease_records/ (leasecodec.go), which it makes
// first with the old bucket's sequence (the last lease sequence number),
// listing tracked ones in tracked_leases/.
// Rows arrive in key order, so lease_records/ pages are filled full. Once
// leases/ is empty it is deleted and done is true.
func migrateLeaseRows(tx *bolt.Tx, n int) (done bool, err error) {
	src := tx.Bucket(bucketLeasesV1)
	dst := tx.Bucket(bucketLeases)
	if src == nil {
		if dst == nil {
			return false, fmt.Errorf("neither %q nor %q bucket: %w", bucketLeasesV1, bucketLeases, ErrSchemaUnknown)
		}
		return true, nil
	}
	if dst == nil {
		if dst, err = tx.CreateBucket(bucketLeases); err != nil {
			return false, err
		}
	}
	if _, err := tx.CreateBucketIfNotExists(bucketTrackedLeases); err != nil {
		return false, err
	}
	if err := dst.SetSequence(src.Sequence()); err != nil {
		return false, err
	}
	dst.FillPercent = 1
	var moved [][]byte
	c := src.Cursor()
	for k, v := c.First(); k != nil && len(moved) < n; k, v = c.Next() {
		if v == nil {
			return false, fmt.Errorf("%w: %q holds a bucket %q", ErrMigration, bucketLeasesV1, k)
		}
		var l Lease
		if err := json.Unmarshal(v, &l); err != nil {
			return false, fmt.Errorf("%w: lease row %q: %v", ErrMigration, k, err)
		}
		if l.CloneID != string(k) {
			return false, fmt.Errorf("%w: lease row %q names clone %q", ErrMigration, k, l.CloneID)
		}
		if err := writeLeaseRow(tx, l); err != nil {
			return false, fmt.Errorf("%w: lease row %q: %v", ErrMigration, k, err)
		}
		moved = append(moved, k)
	}
	for _, k := range moved {
		if err := src.Delete(k); err != nil {
			return false, err
		}
	}
	if k, _ := src.Cursor().First(); k != nil {
		return false, nil
	}
	return true, tx.DeleteBucket(bucketLeasesV1)
}
