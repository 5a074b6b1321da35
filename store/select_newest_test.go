package store_test

import (
	"path/filepath"
	"testing"
	"time"

	"templatefs/internal/sample"
	"templatefs/store"
)

// captureAnchored writes a v6 capture anchored at utc and mono on
// hostA/bootA.
func captureAnchored(t *testing.T, utc time.Time, mono time.Duration, seed uint64) string {
	t.Helper()
	o := sampleOptions(6, 16<<20)
	o.CaptureUTC, o.CaptureMonotonicNs = utc, uint64(mono)
	dir := filepath.Join(t.TempDir(), "capture")
	if err := sample.WriteCapture(dir, o, seed); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAcquireLeaseByKeyPicksNewestCapture: the key lease binds the newest
// capture, not the last publication: by the UTC anchor after a reboot, by
// the monotonic anchor in the capture's boot (even against a wall clock
// stepped back between the captures), and on equal ages the later
// publication.
func TestAcquireLeaseByKeyPicksNewestCapture(t *testing.T) {
	t0 := captureUTC
	mono0 := time.Duration(captureMono)
	lease := func(t *testing.T, st *store.Store, key string) store.GenerationID {
		t.Helper()
		l, created, err := st.AcquireLeaseByKey(key, "clone")
		if err != nil || !created {
			t.Fatalf("AcquireLeaseByKey = %+v, %v, %v", l, created, err)
		}
		return l.Generation
	}

	t.Run("older capture published last, UTC rule", func(t *testing.T) {
		_, st, host := openStore(t)
		newer := publish(t, st, captureAnchored(t, t0.Add(10*time.Hour), mono0, 1))
		older := publish(t, st, captureAnchored(t, t0, mono0, 2))
		host.set(rebootedAt(t0.Add(11 * time.Hour)))
		if got := lease(t, st, newer.KeyID); got != newer.ID {
			t.Errorf("key lease on %s, want %s (captured 10h after %s, published before it)", got, newer.ID, older.ID)
		}
	})

	t.Run("same boot, wall clock stepped back between captures", func(t *testing.T) {
		_, st, host := openStore(t)
		// The wall clock went back 2h between the captures: by it, first
		// is the newer; by the monotonic clock, second is.
		host.set(facts(3*time.Hour, 2*time.Hour))
		second := publish(t, st, captureAnchored(t, t0.Add(time.Hour), mono0+2*time.Hour, 1))
		first := publish(t, st, captureAnchored(t, t0.Add(2*time.Hour), mono0+time.Hour, 2))
		if got := lease(t, st, first.KeyID); got != second.ID {
			t.Errorf("key lease on %s, want %s (1h newer by the monotonic clock)", got, second.ID)
		}
	})

	t.Run("equal ages: the later publication", func(t *testing.T) {
		_, st, host := openStore(t)
		a := publish(t, st, captureAnchored(t, t0, mono0, 1))
		b := publish(t, st, captureAnchored(t, t0, mono0, 2))
		host.set(sameBoot(time.Hour))
		if got := lease(t, st, a.KeyID); got != b.ID {
			t.Errorf("key lease on %s, want %s", got, b.ID)
		}
	})
}
