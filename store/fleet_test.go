package store_test

import (
	"path/filepath"
	"testing"

	"templatefs/store"
	"templatefs/store/templatekey"
)

func ptr[T any](v T) *T { return &v }

// openFleetStore opens a new store with Options.Fleet and publishes one
// capture into it.
func openFleetStore(t *testing.T, capture string) (string, *store.Store, store.Generation) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{Host: sampleHost(), Fleet: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return dir, st, publish(t, st, capture)
}

func fleetState(t *testing.T, st *store.Store) store.FleetState {
	t.Helper()
	fs, err := st.FleetState()
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func state(t *testing.T, st *store.Store, gen store.GenerationID) store.GenerationState {
	t.Helper()
	g, err := st.Generation(gen)
	if err != nil {
		t.Fatal(err)
	}
	return g.State
}

// TestFleetQueueAndApply: two stores holding the same capture share its
// fleet identity; a local tombstone is queued in its own transaction
// (and survives a reopen), a change applied from the fleet is not
// queued, and a resync lifts only what the fleet had tombstoned.
func TestFleetQueueAndApply(t *testing.T) {
	capture := makeCapture(t, 1<<20, 1)
	dirA, a, ga := openFleetStore(t, capture)
	_, b, gb := openFleetStore(t, capture)
	if ga.FleetID() != gb.FleetID() {
		t.Fatalf("same capture in two stores: fleet IDs %s and %s differ", ga.FleetID(), gb.FleetID())
	}
	id := ga.FleetID()

	if _, err := a.Tombstone(ga.ID, 1000); err != nil {
		t.Fatal(err)
	}
	a.Close() // the queue is in the index once Tombstone returns
	a, err := store.Open(dirA, store.Options{Host: sampleHost()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	q := fleetState(t, a).Queue
	if len(q) != 1 || q[0].FleetID != id || !q[0].Tombstone || q[0].UID != 1000 {
		t.Fatalf("queue after a local tombstone = %+v, want one tombstone of %s by uid 1000", q, id)
	}
	// A fleet lift older than the queued tombstone leaves it in place.
	if err := a.ApplyFleet(id, nil, 3, false); err != nil {
		t.Fatal(err)
	}
	if s := state(t, a, ga.ID); s != store.Tombstoned {
		t.Fatalf("a fleet lift while a tombstone is queued: state %s, want tombstoned", s)
	}
	if err := a.FleetDequeue(q[0]); err != nil {
		t.Fatal(err)
	}
	if q := fleetState(t, a).Queue; len(q) != 0 {
		t.Fatalf("queue after dequeue = %+v, want empty", q)
	}
	// This host lifts it and the lift reaches etcd; then the echo of its
	// own tombstone arrives: it is recorded and leaves the lift in place.
	if _, err := a.Lift(ga.ID); err != nil {
		t.Fatal(err)
	}
	for _, q := range fleetState(t, a).Queue { // the lift reached etcd
		if err := a.FleetDequeue(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.ApplyFleet(id, []byte(`{"host":"a"}`), 4, true); err != nil {
		t.Fatal(err)
	}
	if s := state(t, a, ga.ID); s != store.Published {
		t.Fatalf("the echo of this host's own tombstone after its lift: state %s, want published", s)
	}
	if fs := fleetState(t, a); fs.Revision != 4 || string(fs.View[id]) != `{"host":"a"}` {
		t.Fatalf("fleet state after an own echo = %+v, want revision 4 and the view entry", fs)
	}

	if err := b.ApplyFleet(id, []byte(`{"host":"a"}`), 5, false); err != nil {
		t.Fatal(err)
	}
	if s := state(t, b, gb.ID); s != store.Tombstoned {
		t.Fatalf("after a fleet tombstone: state %s, want tombstoned", s)
	}
	fs := fleetState(t, b)
	if len(fs.Queue) != 0 || fs.Revision != 5 || string(fs.View[id]) != `{"host":"a"}` {
		t.Fatalf("fleet state after ApplyFleet = %+v, want no queue, revision 5, the view entry", fs)
	}

	// A publication of the quarantined template is tombstoned at once.
	dup, err := b.Publish(capture, ptr(templatekey.SampleClass()))
	if err != nil {
		t.Fatal(err)
	}
	if dup.State != store.Tombstoned {
		t.Fatalf("publication of a template the fleet quarantines: state %s, want tombstoned", dup.State)
	}

	// A second generation tombstoned locally only (not in the view) stays
	// tombstoned through a resync that finds the fleet empty; the fleet's
	// tombstone is lifted.
	other := publish(t, b, makeCapture(t, 1<<20, 2))
	bLocal, err := b.QueueFleet(store.FleetQueued{FleetID: other.FleetID(), Tombstone: true, Reason: "test"})
	if err != nil || len(bLocal) != 1 || bLocal[0] != other.ID {
		t.Fatalf("QueueFleet = %v, %v; want [%s]", bLocal, err, other.ID)
	}
	if err := b.ResyncFleet(9, map[string][]byte{}); err != nil {
		t.Fatal(err)
	}
	if s := state(t, b, gb.ID); s != store.Published {
		t.Errorf("after a resync without its tombstone: state %s, want published", s)
	}
	if s := state(t, b, other.ID); s != store.Tombstoned {
		t.Errorf("queued tombstone after a resync: state %s, want tombstoned", s)
	}
	if fs := fleetState(t, b); fs.Revision != 9 || len(fs.View) != 0 || len(fs.Queue) != 1 {
		t.Errorf("fleet state after resync = %+v, want revision 9, empty view, one queued", fs)
	}
	if _, err := b.QueueFleet(store.FleetQueued{FleetID: "not-hex"}); err == nil {
		t.Error("QueueFleet of a malformed fleet ID succeeded")
	}
}
