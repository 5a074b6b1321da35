package store_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"templatefs/store"
)

// listTree returns every path under dir, relative to it, sorted.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestOpenRefusesRolledBackIndex puts back an index.db copied aside
// before two publications: their payload directories are above the old
// index's publication sequence, so Open refuses, naming them (and a
// directory that is no generation ID), and deletes nothing, not even the
// staging leftover it would otherwise remove. fsck's Check reports them
// as payload-ahead and repairs nothing. With the index that belongs to
// the payloads put back, the store opens again.
func TestOpenRefusesRolledBackIndex(t *testing.T) {
	dir, st := newStore(t)
	publish(t, st, makeCapture(t, 1<<20, 1))
	st.Close()
	index := filepath.Join(dir, store.IndexFile)
	old, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	st = reopen(t, dir, sampleHost())
	publish(t, st, makeCapture(t, 1<<20, 2))
	publish(t, st, makeCapture(t, 1<<20, 3))
	st.Close()
	current, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index, old, 0o600); err != nil {
		t.Fatal(err)
	}
	writeLeftover := func(rel string) {
		if err := os.MkdirAll(filepath.Join(dir, rel), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeLeftover(filepath.Join(store.StagingDir, "g000004"))
	writeLeftover(filepath.Join(store.PayloadDir, "notes"))
	before := listTree(t, filepath.Join(dir, store.PayloadDir))

	_, err = store.Open(dir, store.Options{Logger: quietLog})
	if !errors.Is(err, store.ErrPayloadAhead) {
		t.Fatalf("Open with a rolled-back index: %v, want ErrPayloadAhead", err)
	}
	for _, want := range []string{
		"payload/g000002 (above the publication sequence 1)",
		"payload/g000003 (above the publication sequence 1)",
		"payload/notes (not a generation ID)",
		"nothing was deleted",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open's error lacks %q: %v", want, err)
		}
	}
	if after := listTree(t, filepath.Join(dir, store.PayloadDir)); !slices.Equal(after, before) {
		t.Errorf("payload/ after the refused Open = %q, want %q", after, before)
	}
	if _, err := os.Stat(filepath.Join(dir, store.StagingDir, "g000004")); err != nil {
		t.Errorf("staging leftover after the refused Open: %v, want it left alone", err)
	}

	st, err = store.Open(dir, store.Options{Logger: quietLog, NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := st.Check(store.CheckOptions{Repair: true})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ahead []string
	for _, p := range problems {
		if p.Kind == store.ProblemPayloadAhead {
			if p.Repaired {
				t.Errorf("%s: repaired", p)
			}
			ahead = append(ahead, p.Subject)
		}
	}
	if want := []string{"payload/g000002", "payload/g000003", "payload/notes"}; !slices.Equal(ahead, want) {
		t.Errorf("Check reported payload-ahead for %q, want %q (all: %v)", ahead, want, problems)
	}
	if after := listTree(t, filepath.Join(dir, store.PayloadDir)); !slices.Equal(after, before) {
		t.Errorf("payload/ after Check with Repair = %q, want %q", after, before)
	}

	if err := os.WriteFile(index, current, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, store.PayloadDir, "notes")); err != nil {
		t.Fatal(err)
	}
	st = reopen(t, dir, sampleHost())
	if gens, err := st.Generations(); err != nil || len(gens) != 3 {
		t.Errorf("with its own index back: %d generations, %v; want 3", len(gens), err)
	}
}

// TestOpenRemovesCrashedPublicationLeftover: a payload directory without
// a record whose ID is at or below the sequence is what a publication
// that died after its rename leaves (its ID was reserved first), and Open
// still removes it. TestPublishCrashLeavesNoGeneration does the same with
// a real crash at each fail point.
func TestOpenRemovesCrashedPublicationLeftover(t *testing.T) {
	dir, st := newStore(t)
	g := publish(t, st, makeCapture(t, 1<<20, 1))
	st.Close()
	// A later publication reserved g000002 and died after its rename.
	burned := filepath.Join(dir, store.PayloadDir, "g000002")
	if err := os.Mkdir(burned, 0o700); err != nil {
		t.Fatal(err)
	}
	editIndex(t, dir, func(tx *bolt.Tx) error { return tx.Bucket([]byte("generations")).SetSequence(2) })
	st = reopen(t, dir, sampleHost())
	if _, err := os.Stat(burned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover %s after Open: %v, want it removed", burned, err)
	}
	if _, err := st.Generation(g.ID); err != nil {
		t.Errorf("published generation after Open: %v", err)
	}
}
