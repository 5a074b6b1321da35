package store_test

import (
	"path/filepath"
	"testing"
	"time"

	"templatefs/internal/hostclock"
	"templatefs/store"
)

// TestChangeTimes: every change to what MNT/store and a status file show
// moves the recorded change times (Generation.LastChange,
// LeasesChangedAt, Key GenerationRemovedAt, SettingsChangedAt,
// Info.ChangedAt), including the
// changes that leave no record behind (a release, a lift, a deletion). The
// clock is the store's Now, stepped from the host clock's now (Init
// records the creation time from it).
func TestChangeTimes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	now := hostclock.Now().UTC()
	clock := func() time.Time { return now }
	step := func() time.Time { now = now.Add(time.Minute); return now }
	st, err := store.Open(dir, store.Options{Host: sampleHost(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	capture := makeCapture(t, 1<<20, 1)
	step()
	g := publish(t, st, capture)
	want := func(what string, at time.Time) {
		t.Helper()
		rec, err := st.Generation(g.ID)
		if err != nil {
			t.Fatal(err)
		}
		leases, err := st.LeasesChangedAt(g.ID)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.LastChange()
		if leases.After(got) {
			got = leases
		}
		if !got.Equal(at) {
			t.Errorf("%s: generation last changed %v (leases %v), want %v", what, got, leases, at)
		}
		if info, err := st.Info(); err != nil || !info.ChangedAt.Equal(at) {
			t.Errorf("%s: Info.ChangedAt %v (%v), want %v", what, info.ChangedAt, err, at)
		}
	}
	want("published", g.PublishedAt)
	at := step()
	if _, _, err := st.AcquireLease(g.ID, "c1"); err != nil {
		t.Fatal(err)
	}
	want("lease granted", at)
	at = step()
	if err := st.CancelLease("c1"); err != nil {
		t.Fatal(err)
	}
	want("lease released", at)
	at = step()
	if _, err := st.Tombstone(g.ID, 0); err != nil {
		t.Fatal(err)
	}
	want("tombstoned", at)
	at = step()
	if _, err := st.Lift(g.ID); err != nil {
		t.Fatal(err)
	}
	want("lifted (the tombstone record is gone)", at)

	at = step()
	if err := st.SetSettings(store.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	if got, err := st.SettingsChangedAt(); err != nil || !got.Equal(at) {
		t.Errorf("SettingsChangedAt %v (%v), want %v", got, err, at)
	}
	if info, _ := st.Info(); !info.ChangedAt.Equal(at) {
		t.Errorf("after settings: Info.ChangedAt %v, want %v", info.ChangedAt, at)
	}

	step()
	if _, err := st.Tombstone(g.ID, 0); err != nil {
		t.Fatal(err)
	}
	at = step()
	if _, err := st.Retire(g.ID, 0); err != nil {
		t.Fatal(err)
	}
	k, err := st.Key(g.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	if !k.GenerationRemovedAt.Equal(at) {
		t.Errorf("key GenerationRemovedAt %v, want %v (the deletion)", k.GenerationRemovedAt, at)
	}
	if info, _ := st.Info(); !info.ChangedAt.Equal(at) || info.Generations != 0 {
		t.Errorf("after deletion: Info.ChangedAt %v with %d generations, want %v and 0", info.ChangedAt, info.Generations, at)
	}
}
