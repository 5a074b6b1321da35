package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/internal/hostclock"
)

func problemKinds(t *testing.T, st *Store, opts CheckOptions) []string {
	t.Helper()
	problems, err := st.Check(opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range problems {
		out = append(out, p.Kind)
	}
	return out
}

// TestCheckPendingRetirement makes the state a crash between the
// retirement intent and the deletion leaves, which Open would resume.
func TestCheckPendingRetirement(t *testing.T) {
	st, g := openLeaseStore(t)
	err := st.db.Update(func(tx *bolt.Tx) error {
		g.State = Retiring
		g.Retirement = &RetirementIntent{At: hostclock.Now(), UID: 1}
		return putJSON(tx.Bucket(bucketGenerations), genKey(g.ID), g)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := problemKinds(t, st, CheckOptions{}); !slices.Equal(got, []string{ProblemRetirementPending}) {
		t.Fatalf("Check = %q, want one %s", got, ProblemRetirementPending)
	}
	problems, err := st.Check(CheckOptions{Repair: true})
	if err != nil || len(problems) != 1 || !problems[0].Repaired {
		t.Fatalf("Check with Repair = %v, %v; want the pending retirement repaired", problems, err)
	}
	if _, err := st.Generation(g.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("generation after repair: got %v, want ErrNotFound", err)
	}
	if _, err := os.Lstat(filepath.Join(st.dir, PayloadDir, g.ID.String())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("payload after repair: %v, want it gone", err)
	}
	if got := problemKinds(t, st, CheckOptions{Digests: true}); len(got) != 0 {
		t.Errorf("Check after repair = %q, want none", got)
	}
}

// TestCheckSparesPublicationInProgress checks that the staging and
// payload directories of a publication in progress are neither reported
// nor repaired away, and are reported once it is over without a record.
func TestCheckSparesPublicationInProgress(t *testing.T) {
	st, _ := openLeaseStore(t)
	id := GenerationID(7)
	if err := st.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketGenerations).SetSequence(uint64(id)) }); err != nil {
		t.Fatal(err) // Publish reserves the ID before it creates any directory
	}
	st.beginPublication(id)
	for _, sub := range []string{StagingDir, PayloadDir} {
		if err := os.Mkdir(filepath.Join(st.dir, sub, id.String()), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if got := problemKinds(t, st, CheckOptions{Repair: true}); len(got) != 0 {
		t.Errorf("Check during publication = %q, want none", got)
	}
	st.endPublication(id)
	want := []string{ProblemPayloadOrphaned, ProblemStagingLeftover}
	if got := problemKinds(t, st, CheckOptions{}); !slices.Equal(got, want) {
		t.Errorf("Check after the publication ended = %q, want %q", got, want)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour:          "24h",
		90 * time.Minute:        "1h30m",
		time.Nanosecond:         "1ns",
		30 * time.Second:        "30s",
		MaxRestoreWindow:        "720h",
		time.Hour + time.Second: "1h0m1s",
		0:                       "0s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
