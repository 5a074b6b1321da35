package store_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"templatefs/internal/sample"
	"templatefs/store"
)

// captureAt writes a v6 capture anchored at utc on hostA/bootA.
func captureAt(t *testing.T, utc time.Time, memory uint64, seed uint64) string {
	t.Helper()
	o := sampleOptions(6, memory)
	o.CaptureUTC = utc
	dir := filepath.Join(t.TempDir(), "capture")
	if err := sample.WriteCapture(dir, o, seed); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rebootedAt is hostA in another boot at wall-clock time utc.
func rebootedAt(utc time.Time) store.HostFacts {
	return store.HostFacts{HostID: hostA, BootID: bootB, HostClock: "linux-boottime", MonotonicNs: 1e9, UTC: utc}
}

func TestAcquireLeaseByKey(t *testing.T) {
	_, st, host := openStore(t)
	if err := st.SetSettings(store.Settings{RestoreWindow: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	t0 := captureUTC
	g1 := publish(t, st, captureAt(t, t0, 16<<20, 1))
	g2 := publish(t, st, captureAt(t, t0.Add(10*time.Hour), 16<<20, 2))
	g3 := publish(t, st, captureAt(t, t0.Add(20*time.Hour), 16<<20, 3))
	other := publish(t, st, captureAt(t, t0, 32<<20, 4))
	key := g1.KeyID
	if g2.KeyID != key || g3.KeyID != key || other.KeyID == key {
		t.Fatalf("keys %s %s %s %s: want the first three equal, the last different", g1.KeyID, g2.KeyID, g3.KeyID, other.KeyID)
	}

	// At t0+25h: g1 is past its window, g2 and g3 are eligible.
	host.set(rebootedAt(t0.Add(25 * time.Hour)))
	l, created, err := st.AcquireLeaseByKey(key, "clone-a")
	if err != nil || !created || l.Generation != g3.ID || l.KeyID != key {
		t.Fatalf("AcquireLeaseByKey = %+v, %v, %v; want a new lease on the newest, %s", l, created, err, g3.ID)
	}
	if _, err := st.Tombstone(g3.ID, 0); err != nil {
		t.Fatal(err)
	}
	if l, _, err := st.AcquireLeaseByKey(key, "clone-b"); err != nil || l.Generation != g2.ID {
		t.Errorf("with %s tombstoned: %+v, %v; want a lease on %s", g3.ID, l, err, g2.ID)
	}
	if again, created, err := st.AcquireLeaseByKey(key, "clone-a"); err != nil || created || again != l {
		t.Errorf("retry = %+v, %v, %v; want the existing lease on %s", again, created, err, g3.ID)
	}

	// At t0+35h: g2 is past its window too and g3 is tombstoned.
	host.set(rebootedAt(t0.Add(35 * time.Hour)))
	_, _, err = st.AcquireLeaseByKey(key, "clone-c")
	wantWhy := "g000003 tombstoned; g000002 ineligible: restore window of 24h passed 1h ago; g000001 ineligible: restore window of 24h passed 11h ago"
	if !errors.Is(err, store.ErrIneligible) || !strings.Contains(err.Error(), wantWhy) {
		t.Errorf("no eligible generation: got %v, want ErrIneligible listing %q", err, wantWhy)
	}
	if _, err := st.Lease("clone-c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused selection left a lease: %v", err)
	}
	if again, _, err := st.AcquireLeaseByKey(key, "clone-a"); err != nil || again.Generation != g3.ID {
		t.Errorf("retry after the key went ineligible = %+v, %v; want the existing lease", again, err)
	}
	if _, err := st.Lift(g3.ID); err != nil {
		t.Fatal(err)
	}
	if l, _, err := st.AcquireLeaseByKey(key, "clone-c"); err != nil || l.Generation != g3.ID {
		t.Errorf("after lifting %s: %+v, %v; want a lease on it", g3.ID, l, err)
	}

	if _, _, err := st.AcquireLeaseByKey(other.KeyID, "clone-a"); !errors.Is(err, store.ErrLeaseConflict) {
		t.Errorf("clone with a lease under another key: got %v, want ErrLeaseConflict", err)
	}
	if _, _, err := st.AcquireLeaseByKey(strings.Repeat("0", 64), "clone-d"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: got %v, want ErrNotFound", err)
	}
	if _, _, err := st.AcquireLeaseByKey("beef", "clone-d"); !errors.Is(err, store.ErrInvalidID) {
		t.Errorf("malformed key: got %v, want ErrInvalidID", err)
	}

	// A key whose every generation was retired stays known, and refuses.
	if _, err := st.Tombstone(other.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retire(other.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AcquireLeaseByKey(other.KeyID, "clone-e"); !errors.Is(err, store.ErrIneligible) || !strings.Contains(err.Error(), "retired") {
		t.Errorf("key with every generation retired: got %v, want ErrIneligible saying so", err)
	}
	if _, _, err := st.AcquireLeaseByKey(key, "a/b"); !errors.Is(err, store.ErrInvalidID) {
		t.Errorf("malformed clone ID: got %v, want ErrInvalidID", err)
	}
}
