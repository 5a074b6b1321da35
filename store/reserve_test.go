package store

import (
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// holdCommitterThen makes st's committer busy with a request that stays
// inside its transaction until the returned function is called, then
// runs then in that transaction (nil: nothing) and commits it.
func holdCommitterThen(t *testing.T, st *Store, then func(tx *bolt.Tx) error) (release func()) {
	t.Helper()
	inside, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- st.commits.update(func(tx *bolt.Tx) error {
			close(inside)
			<-hold
			if then != nil {
				return then(tx)
			}
			return nil
		})
	}()
	<-inside
	return func() {
		close(hold)
		if err := <-done; err != nil {
			t.Errorf("holding request: %v", err)
		}
	}
}

// TestReservationPending: a reservation returns with its lease decided
// (sequence number, state) before its commit; until the commit ends,
// listings leave it out, and a read of its clone ID and a second
// acquisition wait for the commit and answer from it.
func TestReservationPending(t *testing.T) {
	st, g := openLeaseStore(t)
	release := holdCommitterThen(t, st, nil)
	r, err := st.ReserveLease(g.ID, "pending")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Created || r.Lease.Seq != 1 || r.Lease.State != Reserved || r.Lease.Generation != g.ID || !validLaunchID(r.Lease.LaunchID) {
		t.Fatalf("reservation %+v: want a new reserved lease on %s with Seq 1 and a launch ID", r, g.ID)
	}
	if ls, err := st.GenerationLeases(g.ID); err != nil || len(ls) != 0 {
		t.Errorf("GenerationLeases while the commit is held: %v, %v; want none", ls, err)
	}
	if ls, err := st.LeasesAfter("", 10); err != nil || len(ls) != 0 {
		t.Errorf("LeasesAfter while the commit is held: %v, %v; want none", ls, err)
	}
	read := make(chan error, 1)
	go func() {
		l, err := st.Lease("pending")
		if err == nil && l.Seq != 1 {
			err = errors.New("another lease")
		}
		read <- err
	}()
	again := make(chan *Reservation, 1)
	go func() {
		r2, err := st.ReserveLease(g.ID, "pending")
		if err != nil {
			t.Errorf("second reservation of pending: %v", err)
		}
		again <- r2
	}()
	release()
	if err := r.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := <-read; err != nil {
		t.Errorf("Lease(pending) read while its commit ran: %v; want the committed lease", err)
	}
	if r2 := <-again; r2 == nil || r2.Created || r2.Lease.Seq != 1 || r2.Wait() != nil {
		t.Errorf("second reservation of pending: %+v; want the committed lease, not created", r2)
	}
	if ls, err := st.GenerationLeases(g.ID); err != nil || len(ls) != 1 {
		t.Errorf("GenerationLeases after the commit: %v, %v; want the lease", ls, err)
	}
}

// TestReservationRefusedAtCommit: a generation tombstoned between a
// reservation and its commit refuses the commit: Wait returns
// ErrTombstoned and no lease exists; the next lease takes the next
// sequence number.
func TestReservationRefusedAtCommit(t *testing.T) {
	st, g := openLeaseStore(t)
	tombstone := func(tx *bolt.Tx) error {
		gen, err := getGeneration(tx, g.ID)
		if err != nil {
			return err
		}
		gen.State, gen.Tombstone = Tombstoned, &Tombstone{At: st.now().UTC()}
		return putJSON(tx.Bucket(bucketGenerations), genKey(g.ID), gen)
	}
	release := holdCommitterThen(t, st, tombstone)
	r, err := st.ReserveLease(g.ID, "late")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := r.Wait(); !errors.Is(err, ErrTombstoned) {
		t.Fatalf("Wait after a tombstone committed first: %v; want ErrTombstoned", err)
	}
	if err := r.Wait(); !errors.Is(err, ErrTombstoned) {
		t.Errorf("second Wait: %v; want the same error", err)
	}
	if _, err := st.Lease("late"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lease(late) after its refused commit: %v; want ErrNotFound", err)
	}
	if _, err := st.Lift(g.ID); err != nil {
		t.Fatal(err)
	}
	l, _, err := st.AcquireLease(g.ID, "later")
	if err != nil || l.Seq != 2 {
		t.Errorf("AcquireLease after the refused commit: %+v, %v; want Seq 2", l, err)
	}
}

// TestCloseWaitsForReservations: Close returns only after every
// reservation's commit has ended, so a reservation whose Wait returned
// nil is in the store when it is opened again.
func TestCloseWaitsForReservations(t *testing.T) {
	st, g := openLeaseStore(t)
	var rs []*Reservation
	for _, clone := range []string{"c1", "c2", "c3"} {
		r, err := st.ReserveLease(g.ID, clone)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	dir := st.Dir()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := Open(dir, Options{Host: st.host, Logger: st.log})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	for _, r := range rs {
		if err := r.Wait(); err != nil {
			t.Fatalf("Wait of %s: %v", r.Lease.CloneID, err)
		}
		if l, err := st2.Lease(r.Lease.CloneID); err != nil || l.Seq != r.Lease.Seq {
			t.Errorf("after Close and Open, lease %s: %+v, %v; want Seq %d", r.Lease.CloneID, l, err, r.Lease.Seq)
		}
	}
}
