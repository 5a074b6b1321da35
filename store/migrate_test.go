package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// childMigrateEnv names the store a child of this test binary opens, to
// be killed by an armed fail point during its migration (init below).
const childMigrateEnv = "STORE_TEST_CHILD_MIGRATE"

func init() {
	if dir := os.Getenv(childMigrateEnv); dir != "" {
		st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		st.Close()
		os.Exit(0)
	}
}

// v1Store returns a closed copy of damageBase rewritten as schema
// version 1 wrote it: JSON lease rows in leases/, with extra further
// Reserved leases written straight into the index (so that a migration
// takes several batches), and the leases as they must read after
// migration.
func v1Store(t *testing.T, extra int) (string, []Lease) {
	t.Helper()
	dir := copyStore(t, damageBase(t))
	db, err := bolt.Open(filepath.Join(dir, IndexFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var want []Lease
	err = db.Update(func(tx *bolt.Tx) error {
		rows := tx.Bucket(bucketLeases)
		old, err := tx.CreateBucket(bucketLeasesV1)
		if err != nil {
			return err
		}
		var gen GenerationID
		var key string
		if err := rows.ForEach(func(k, v []byte) error {
			l, err := decodeLeaseRow(k, v)
			if err != nil {
				return err
			}
			gen, key = l.Generation, l.KeyID
			want = append(want, l)
			return putJSON(old, k, l)
		}); err != nil {
			return err
		}
		gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(gen))
		for i := range extra {
			l := Lease{CloneID: fmt.Sprintf("extra-%06d", i), Generation: gen, KeyID: key, Seq: uint64(1000 + i), LaunchID: strings.Repeat("0f", 16), State: Reserved}
			if i%3 == 0 {
				l.State, l.Process = Bound, &ProcessIdentity{PID: 100 + i, StartTime: 7, BootID: strings.Repeat("1e", 16)}
			}
			if err := putJSON(old, []byte(l.CloneID), l); err != nil {
				return err
			}
			if err := gl.Put([]byte(l.CloneID), nil); err != nil {
				return err
			}
			want = append(want, l)
		}
		if err := old.SetSequence(uint64(1000 + extra)); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketLeases, bucketTrackedLeases} { // version 1 had neither
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyVersion, binary.BigEndian.AppendUint32(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// assertMigrated opens dir and checks that it is at SchemaVersion with
// no trace of the old layout, holds exactly want, keeps the lease
// sequence, lists the tracked leases, and passes Check.
func assertMigrated(t *testing.T, dir string, want []Lease, seq uint64) {
	t.Helper()
	st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler), NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Leases()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || !reflect.DeepEqual(got, want) {
		t.Fatalf("after migration: %d leases, want %d (equal: %v)", len(got), len(want), reflect.DeepEqual(got, want))
	}
	if err := st.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := binary.BigEndian.Uint32(meta.Get(keyVersion)); v != SchemaVersion || meta.Get(keyMigrating) != nil || tx.Bucket(bucketLeasesV1) != nil {
			return fmt.Errorf("version %d, migrating %x, leases/ bucket %v", v, meta.Get(keyMigrating), tx.Bucket(bucketLeasesV1) != nil)
		}
		if got := tx.Bucket(bucketLeases).Sequence(); got != seq {
			return fmt.Errorf("lease sequence %d, want %d", got, seq)
		}
		tracked := 0
		for _, l := range want {
			if l.State == Bound {
				tracked++
			}
		}
		if n := tx.Bucket(bucketTrackedLeases).Stats().KeyN; n != tracked || n == 0 {
			return fmt.Errorf("%d leases in tracked_leases/, want %d", n, tracked)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	problems, err := st.Check(CheckOptions{})
	if err != nil || len(problems) > 0 {
		t.Fatalf("check after migration: %v %+v", err, problems)
	}
}

// TestMigrateV1: Open moves every JSON lease row of a version 1 index,
// in several batches, to binary rows, keeps the lease sequence, and the
// result passes Check; a read-only Open (fsck) refuses it instead,
// changing nothing.
func TestMigrateV1(t *testing.T) {
	dir, want := v1Store(t, 2*migrateBatch+7)
	before, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler), NoRecover: true}); !errors.Is(err, ErrSchemaTooOld) || !strings.Contains(err.Error(), "templatefs mount") {
		t.Fatalf("read-only open of a version 1 store: %v, want ErrSchemaTooOld saying how to migrate", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, IndexFile)); string(after) != string(before) {
		t.Fatal("a refused read-only open changed the index")
	}
	st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	assertMigrated(t, dir, want, uint64(1000+2*migrateBatch+7))
}

// TestMigrateCrash kills a real process (this test binary) at the kill
// point after the first batch of its migration commits, finds the index
// half migrated and refused by a version 1 reader (version 2), and
// reopens it: the migration resumes and ends with every lease.
func TestMigrateCrash(t *testing.T) {
	dir, want := v1Store(t, migrateBatch+5)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childMigrateEnv+"="+dir, FailpointEnv+"=migrate-batch-committed")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want death by SIGKILL at migrate-batch-committed:\n%s", err, out)
	}
	db, err := bolt.Open(filepath.Join(dir, IndexFile), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		v, m := binary.BigEndian.Uint32(meta.Get(keyVersion)), meta.Get(keyMigrating)
		oldN, newN := tx.Bucket(bucketLeasesV1).Stats().KeyN, tx.Bucket(bucketLeases).Stats().KeyN
		if v != 2 || len(m) != 4 || binary.BigEndian.Uint32(m) != 1 || oldN == 0 || newN != migrateBatch || oldN+newN != len(want) {
			return fmt.Errorf("after the kill: version %d, migrating %x, %d rows left in leases/, %d in lease_records/ (want %d in all)", v, m, oldN, newN, len(want))
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	assertMigrated(t, dir, want, uint64(1000+migrateBatch+5))
}

// TestMigrateRefusesBadRow: a version 1 row that does not decode stops
// the migration with ErrMigration naming it; no lease is lost, and the
// next Open refuses the same way.
func TestMigrateRefusesBadRow(t *testing.T) {
	dir, want := v1Store(t, 0)
	db, err := bolt.Open(filepath.Join(dir, IndexFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLeasesV1).Put([]byte("zz-broken"), []byte(`{"clone_id":`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for range 2 {
		_, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
		if !errors.Is(err, ErrMigration) || !strings.Contains(err.Error(), "zz-broken") {
			t.Fatalf("open: %v, want ErrMigration naming zz-broken", err)
		}
	}
	db, err = bolt.Open(filepath.Join(dir, IndexFile), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		n := tx.Bucket(bucketLeasesV1).Stats().KeyN
		if rows := tx.Bucket(bucketLeases); rows != nil {
			n += rows.Stats().KeyN
		}
		if n != len(want)+1 {
			return fmt.Errorf("%d rows in all, want %d", n, len(want)+1)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
