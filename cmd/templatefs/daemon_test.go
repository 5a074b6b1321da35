package main

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"templatefs/leasefs"
	"templatefs/store"
)

// TestDaemonRelease: release runs the registered stops once, last first,
// while the store is still open, then detaches leasefs and closes the
// store, so another Open takes the lock; a second release does nothing.
// While it runs, waitingFor names the stops not returned yet.
func TestDaemonRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{st: st}
	if d.lfs, err = leasefs.New(st, leasefs.Options{}); err != nil {
		t.Fatal(err)
	}
	var order []string
	waiting := map[string][]string{"exits": {"exits", "control", detachStep}, "control": {"control", detachStep}}
	for _, name := range []string{"control", "exits"} {
		d.OnStop(name, func() {
			if _, err := st.Generations(); err != nil {
				t.Errorf("stop %s: the store is already closed: %v", name, err)
			}
			if d.lfs.Detached() {
				t.Errorf("stop %s: leasefs is already detached", name)
			}
			if got := d.waitingFor(); !slices.Equal(got, waiting[name]) {
				t.Errorf("stop %s: waitingFor() = %q, want %q", name, got, waiting[name])
			}
			order = append(order, name)
		})
	}
	if got := d.waitingFor(); len(got) != 0 {
		t.Errorf("waitingFor() before release = %q, want none", got)
	}
	if _, err := store.Open(dir, store.Options{}); err == nil {
		t.Fatal("a second Open succeeded while the daemon holds the store")
	}
	if err := d.release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := d.release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if got := d.waitingFor(); len(got) != 0 {
		t.Errorf("waitingFor() after release = %q, want none", got)
	}
	if want := []string{"exits", "control"}; !slices.Equal(order, want) {
		t.Errorf("stops ran %q, want %q once", order, want)
	}
	if _, err := d.lfs.Walk("generations"); !errors.Is(err, leasefs.ErrDetached) {
		t.Errorf("walk after release: %v, want ErrDetached", err)
	}
	next, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("Open after release (the next daemon): %v", err)
	}
	next.Close()
}
