package store_test

import (
	"testing"

	"templatefs/store"
)

// TestGenerationRecordsAreCopies: a caller changing a returned record does
// not change what the next read returns, and a rewritten record is read
// as rewritten (the decoded-record cache is keyed by content).
func TestGenerationRecordsAreCopies(t *testing.T) {
	_, st := newStore(t)
	g := publish(t, st, makeCapture(t, 1<<20, 3))
	if _, err := st.Tombstone(g.ID, 7); err != nil {
		t.Fatal(err)
	}
	first, err := st.Generation(g.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := first.Artifacts[0].SHA256
	first.Artifacts[0].SHA256 = "changed"
	first.Tombstone.UID = 99
	second, err := st.Generation(g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if second.Artifacts[0].SHA256 != want || second.Tombstone.UID != 7 {
		t.Errorf("second read sees the first caller's changes: sha256 %q uid %d", second.Artifacts[0].SHA256, second.Tombstone.UID)
	}
	if _, err := st.Lift(g.ID); err != nil {
		t.Fatal(err)
	}
	if third, err := st.Generation(g.ID); err != nil || third.State != store.Published || third.Tombstone != nil {
		t.Errorf("after lift: state %s tombstone %v, %v; want published, none", third.State, third.Tombstone, err)
	}
}
