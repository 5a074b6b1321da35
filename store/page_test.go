package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"templatefs/store"
)

// TestPages: each paged read returns at most n records after its cursor,
// in key order, and the pages put together are the whole listing.
func TestPages(t *testing.T) {
	_, st := newStore(t)
	capture := makeCapture(t, 1<<20, 1)
	g1, g2, g3 := publish(t, st, capture), publish(t, st, capture), publish(t, st, capture)
	for i, clone := range []string{"d", "a", "c", "b", "e"} {
		gen := []store.GenerationID{g1.ID, g2.ID}[i%2]
		if _, _, err := st.AcquireLease(gen, clone); err != nil {
			t.Fatal(err)
		}
	}
	leaseNames := func(page func(after string) ([]store.Lease, error)) []string {
		var out []string
		after := ""
		for {
			ls, err := page(after)
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) > 2 {
				t.Fatalf("page of %d, asked 2", len(ls))
			}
			for _, l := range ls {
				out = append(out, l.CloneID)
			}
			if len(ls) < 2 {
				return out
			}
			after = ls[len(ls)-1].CloneID
		}
	}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"leases", leaseNames(func(a string) ([]store.Lease, error) { return st.LeasesAfter(a, 2) }), []string{"a", "b", "c", "d", "e"}},
		{"g1 leases", leaseNames(func(a string) ([]store.Lease, error) { return st.GenerationLeasesAfter(g1.ID, a, 2) }), []string{"c", "d", "e"}},
		{"g3 leases", leaseNames(func(a string) ([]store.Lease, error) { return st.GenerationLeasesAfter(g3.ID, a, 2) }), nil},
	}
	gens, err := st.GenerationsAfter(g1.ID, 5)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range gens {
		ids = append(ids, g.ID.String())
	}
	tests = append(tests, struct {
		name string
		got  []string
		want []string
	}{"generations after g1", ids, []string{g2.ID.String(), g3.ID.String()}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Equal(tt.got, tt.want) {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if _, err := st.GenerationLeasesAfter(99, "", 2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("leases of an unknown generation: %v, want ErrNotFound", err)
	}
	info, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st.CreatedAt(); err != nil || !c.Equal(info.CreatedAt) {
		t.Errorf("CreatedAt = %v, %v; Info says %v", c, err, info.CreatedAt)
	}
}

// TestRestoreRefusals: Restore refuses a non-empty target and a backup
// missing a payload, leaving nothing behind; a good backup restores.
func TestRestoreRefusals(t *testing.T) {
	_, st := newStore(t)
	g := publish(t, st, makeCapture(t, 1<<20, 2))
	snap, size, err := st.SnapshotIndex()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if n, err := st.IndexSize(); err != nil || n != size {
		t.Errorf("IndexSize = %d, %v; snapshot is %d bytes", n, err, size)
	}
	index := filepath.Join(t.TempDir(), "store.db")
	data := make([]byte, size)
	if _, err := snap.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index, data, 0o600); err != nil {
		t.Fatal(err)
	}
	good := func(g store.Generation, a store.Artifact) (*os.File, error) { return st.OpenPayload(g.ID, a.Name) }
	missing := func(g store.Generation, a store.Artifact) (*os.File, error) {
		if a.Name == "state.bin" {
			return nil, fmt.Errorf("open %s: %w", a.Name, os.ErrNotExist)
		}
		return good(g, a)
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o600)
	tests := []struct {
		name string
		dir  string
		open store.BackupSource
		want error
	}{
		{"not empty", full, good, store.ErrExists},
		{"payload missing", filepath.Join(t.TempDir(), "s"), missing, store.ErrBackupMismatch},
		{"good", filepath.Join(t.TempDir(), "s"), good, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := store.Restore(tt.dir, index, tt.open)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Restore = %v, want %v", err, tt.want)
			}
			left, _ := os.ReadDir(filepath.Dir(tt.dir))
			switch {
			case tt.want == nil:
				r, err := store.Open(tt.dir, store.Options{NoRecover: true})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if rg, err := r.Generation(g.ID); err != nil || len(rg.Artifacts) != len(g.Artifacts) {
					t.Errorf("restored generation %+v, %v", rg, err)
				}
			case tt.dir == full:
				for _, e := range left {
					if strings.Contains(e.Name(), ".restore-") {
						t.Errorf("a refused restore left %s", e.Name())
					}
				}
			case len(left) != 0:
				t.Errorf("a refused restore left %v", left)
			}
		})
	}
}

// TestRestoreRefusesArtifactPathInIndex: a backup's store.db whose
// generation record names an artifact by a path ("../../../escape")
// instead of a capture file name is refused before anything is written,
// so a hostile backup cannot make Restore create files outside the store.
func TestRestoreRefusesArtifactPathInIndex(t *testing.T) {
	_, st := newStore(t)
	g := publish(t, st, makeCapture(t, 1<<20, 2))
	snap, size, err := st.SnapshotIndex()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	data := make([]byte, size)
	if _, err := snap.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(t.TempDir(), "store.db")
	if err := os.WriteFile(index, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(index, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	const escape = "../../../escape"
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("generations"))
		return b.ForEach(func(k, v []byte) error {
			return b.Put(k, bytes.ReplaceAll(v, []byte(`"state.bin"`), []byte(`"`+escape+`"`)))
		})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "restored")
	open := func(rg store.Generation, a store.Artifact) (*os.File, error) {
		if a.Name == escape {
			return st.OpenPayload(g.ID, "state.bin") // the bytes the record's digest names
		}
		return st.OpenPayload(g.ID, a.Name)
	}
	err = store.Restore(dir, index, open)
	if !errors.Is(err, store.ErrBackupMismatch) || !strings.Contains(err.Error(), escape) {
		t.Errorf("Restore = %v, want ErrBackupMismatch naming %q", err, escape)
	}
	for _, p := range []string{filepath.Join(parent, "escape"), filepath.Join(filepath.Dir(parent), "escape"), dir} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the refused restore (%v)", p, err)
		}
	}
}
