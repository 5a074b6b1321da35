package store_test

import (
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"templatefs/store"
)

// scanCounts counts the records of st by state the slow way, from full
// listings.
func scanCounts(t *testing.T, st *store.Store) store.StateCounts {
	t.Helper()
	out := store.StateCounts{Leases: map[store.LeaseState]int64{}, Generations: map[store.GenerationState]int64{}}
	for _, s := range store.LeaseStates {
		out.Leases[s] = 0
	}
	for _, s := range store.GenerationStates {
		out.Generations[s] = 0
	}
	leases, err := st.Leases()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		out.Leases[l.State]++
	}
	gens, err := st.Generations()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens {
		out.Generations[g.State]++
	}
	return out
}

func checkCounts(t *testing.T, st *store.Store, when string) {
	t.Helper()
	got, err := st.StateCounts()
	if err != nil {
		t.Fatal(err)
	}
	if want := scanCounts(t, st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: StateCounts = %v, a scan counts %v", when, got, want)
	}
}

// TestStateCounts follows every transition of leases and generations
// and checks the counters kept from commits against a full scan, also
// when the first walk races with commits, and across a reopen.
func TestStateCounts(t *testing.T) {
	dir, st, host := openStore(t)
	a := publish(t, st, makeCapture(t, 16<<20, 1))
	b := publish(t, st, makeCapture(t, 16<<20, 2))

	// Leases committed while the first walk runs are counted once.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				if _, _, err := st.AcquireLease(a.ID, fmt.Sprintf("c%d-%d", w, i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if _, err := st.StateCounts(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	checkCounts(t, st, "200 concurrent acquisitions")

	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	if _, err := st.BindLease("c0-0", sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, st, "bound")
	if err := st.ReleaseLease("c0-0"); err == nil {
		t.Fatal("release of a live clone's lease succeeded")
	}
	checkCounts(t, st, "refused release")
	if err := st.CancelLease("c0-1"); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, st, "cancelled")
	if _, err := st.Tombstone(b.ID, 0); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, st, "tombstoned")
	if _, err := st.Retire(b.ID, 0); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, st, "retired")
	sleep.Process.Kill()
	sleep.Wait()
	if err := st.ReleaseLease("c0-0"); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, st, "released")

	st.Close()
	st = reopen(t, dir, host)
	checkCounts(t, st, "after reopen")
}

// observed records what the store tells its Observer.
type observed struct {
	mu        sync.Mutex
	leaseOps  map[string]int
	groups    int
	commits   int
	published int64
}

func (o *observed) LeaseOp(op string, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.leaseOps[op]++
	}
}
func (o *observed) GroupCommit(n int) { o.mu.Lock(); o.groups += n; o.mu.Unlock() }
func (o *observed) IndexCommit(time.Duration) {
	o.mu.Lock()
	o.commits++
	o.mu.Unlock()
}
func (o *observed) Published(n int64, _ time.Duration) { o.mu.Lock(); o.published += n; o.mu.Unlock() }
func (o *observed) EventsDropped(int)                  {}

// TestObserver checks that the store reports lease operations, group
// commits, index commits and publications to its Observer.
func TestObserver(t *testing.T) {
	dir, st, host := openStore(t)
	st.Close()
	o := &observed{leaseOps: map[string]int{}}
	st, err := store.Open(dir, store.Options{Host: host, Logger: quietLog, Observer: o})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	if _, _, err := st.AcquireLease(g.ID, "c1"); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var size int64
	for _, a := range g.Artifacts {
		size += a.Size
	}
	if o.leaseOps["create"] != 1 || o.groups != 1 || o.commits < 2 || o.published != size {
		t.Errorf("observed lease ops %v, %d grouped requests, %d index commits, %d bytes published; want 1 create, 1, >= 2, %d",
			o.leaseOps, o.groups, o.commits, o.published, size)
	}
}
