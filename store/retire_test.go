package store_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"templatefs/store"
)

func payloadExists(t *testing.T, dir string, gen store.GenerationID) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(dir, store.PayloadDir, gen.String()))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// assertRetired checks that gen is gone from every lookup and from disk,
// and that Check finds the store clean.
func assertRetired(t *testing.T, dir string, st *store.Store, g store.Generation) {
	t.Helper()
	if _, err := st.Generation(g.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Generation(%s) of a retired generation: got %v, want ErrNotFound", g.ID, err)
	}
	if ids, err := st.KeyGenerations(g.KeyID); err != nil || len(ids) != 0 {
		t.Errorf("KeyGenerations = %v, %v; want none", ids, err)
	}
	if payloadExists(t, dir, g.ID) {
		t.Errorf("payload/%s still exists", g.ID)
	}
	if problems, err := st.Check(store.CheckOptions{Digests: true}); err != nil || len(problems) != 0 {
		t.Errorf("Check = %v, %v; want a clean store", problems, err)
	}
}

func TestLift(t *testing.T) {
	_, st, _ := openStore(t)
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	if got, err := st.Lift(g.ID); err != nil || got.State != store.Published {
		t.Errorf("Lift of a published generation = %+v, %v; want it unchanged", got, err)
	}
	if _, err := st.Tombstone(g.ID, 1000); err != nil {
		t.Fatal(err)
	}
	got, err := st.Lift(g.ID)
	if err != nil || got.State != store.Published || got.Tombstone != nil {
		t.Errorf("Lift = %+v, %v; want published without a tombstone record", got, err)
	}
	if _, _, err := st.AcquireLease(g.ID, "clone-a"); err != nil {
		t.Errorf("lease after lift: %v", err)
	}
	if _, err := st.Lift(99); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown generation: got %v, want ErrNotFound", err)
	}
}

func TestRetireWaitsForLeases(t *testing.T) {
	dir, st, _ := openStore(t)
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	if _, err := st.Retire(g.ID, 1000); !errors.Is(err, store.ErrNotTombstoned) {
		t.Errorf("Retire of a published generation: got %v, want ErrNotTombstoned", err)
	}
	for _, clone := range []string{"clone-a", "clone-b"} {
		if _, _, err := st.AcquireLease(g.ID, clone); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Tombstone(g.ID, 1000); err != nil {
		t.Fatal(err)
	}
	r, err := st.Retire(g.ID, 1001)
	if err != nil || r.State != store.Retiring || r.Retirement == nil || r.Retirement.UID != 1001 || r.Tombstone == nil {
		t.Fatalf("Retire = %+v, %v; want retiring, by uid 1001, tombstone kept", r, err)
	}
	if again, err := st.Retire(g.ID, 0); err != nil || again.Retirement.UID != 1001 {
		t.Errorf("second Retire = %+v, %v; want the first intent unchanged", again, err)
	}
	if again, err := st.Tombstone(g.ID, 0); err != nil || again.State != store.Retiring {
		t.Errorf("Tombstone of a retiring generation = %+v, %v; want it unchanged", again, err)
	}
	if _, err := st.Lift(g.ID); !errors.Is(err, store.ErrRetiring) {
		t.Errorf("Lift of a retiring generation: got %v, want ErrRetiring", err)
	}
	if _, _, err := st.AcquireLease(g.ID, "clone-c"); !errors.Is(err, store.ErrRetiring) {
		t.Errorf("new lease on a retiring generation: got %v, want ErrRetiring", err)
	}
	f, err := st.OpenPayload(g.ID, "state.bin")
	if err != nil {
		t.Fatalf("retiring payload is not readable: %v", err)
	}
	f.Close()
	if info, err := st.Info(); err != nil || info.Retiring != 1 {
		t.Errorf("Info = %+v, %v; want 1 retiring", info, err)
	}

	if err := st.CancelLease("clone-a"); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Generation(g.ID); err != nil || got.State != store.Retiring || !payloadExists(t, dir, g.ID) {
		t.Fatalf("with one lease left: %+v, %v; want retiring with its payload", got, err)
	}
	if err := st.CancelLease("clone-b"); err != nil {
		t.Fatal(err)
	}
	assertRetired(t, dir, st, g)
	if next := publish(t, st, makeCapture(t, 16<<20, 2)); next.ID != g.ID+1 {
		t.Errorf("publication after retirement got %s, want %s (IDs are never reused)", next.ID, g.ID+1)
	}
}

func TestRetireWithoutLeasesDeletesAtOnce(t *testing.T) {
	dir, st, _ := openStore(t)
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	if _, err := st.Tombstone(g.ID, 1000); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Retire(g.ID, 1000); err != nil || r.State != store.Retiring {
		t.Fatalf("Retire = %+v, %v", r, err)
	}
	assertRetired(t, dir, st, g)
	if _, err := st.Retire(g.ID, 1000); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Retire of a retired generation: got %v, want ErrNotFound", err)
	}
}

// TestCrashChild is the child of the crash tests: it opens the store in
// STORE_TEST_CRASH_DIR and runs STORE_TEST_CRASH_OP on generation 1,
// expecting to be killed at the armed fail point.
func TestCrashChild(t *testing.T) {
	op := os.Getenv("STORE_TEST_CRASH_OP")
	if op == "" {
		t.Skip("runs only as the child of a crash test")
	}
	st := reopen(t, os.Getenv("STORE_TEST_CRASH_DIR"), sampleHost())
	var err error
	switch op {
	case "acquire-by-key":
		g, gerr := st.Generation(1)
		if gerr != nil {
			t.Fatal(gerr)
		}
		_, _, err = st.AcquireLeaseByKey(g.KeyID, "crash-clone")
	case "tombstone":
		_, err = st.Tombstone(1, 7)
	case "lift":
		_, err = st.Lift(1)
	case "retire":
		_, err = st.Retire(1, 7)
	case "settings":
		err = st.SetSettings(store.Settings{RestoreWindow: time.Hour, RefuseReboot: true})
	default:
		t.Fatalf("unknown op %q", op)
	}
	t.Fatalf("%s returned (%v) instead of dying at fail point %s", op, err, os.Getenv(store.FailpointEnv))
}

// TestCrashAtFailPoints kills a real process at each fail point of
// leases, tombstones, lifts, retirement and settings, then reopens the
// store and checks that the step is durable and recovery is clean.
func TestCrashAtFailPoints(t *testing.T) {
	tests := []struct {
		point, op string
		prepare   func(t *testing.T, st *store.Store, g store.Generation)
		check     func(t *testing.T, dir string, st *store.Store, g store.Generation)
	}{
		{"lease-committed", "acquire-by-key", nil, func(t *testing.T, dir string, st *store.Store, g store.Generation) {
			if l, err := st.Lease("crash-clone"); err != nil || l.Generation != g.ID {
				t.Errorf("lease = %+v, %v; want it on %s", l, err, g.ID)
			}
		}},
		{"tombstone-committed", "tombstone", nil, func(t *testing.T, dir string, st *store.Store, g store.Generation) {
			if got, err := st.Generation(g.ID); err != nil || got.State != store.Tombstoned {
				t.Errorf("generation = %+v, %v; want tombstoned", got, err)
			}
		}},
		{"lift-committed", "lift", tombstone, func(t *testing.T, dir string, st *store.Store, g store.Generation) {
			if got, err := st.Generation(g.ID); err != nil || got.State != store.Published {
				t.Errorf("generation = %+v, %v; want published", got, err)
			}
		}},
		{"settings-committed", "settings", nil, func(t *testing.T, dir string, st *store.Store, g store.Generation) {
			if set, err := st.Settings(); err != nil || set.RestoreWindow != time.Hour || !set.RefuseReboot {
				t.Errorf("settings = %+v, %v; want the new ones", set, err)
			}
		}},
		{"retire-intent-committed", "retire", tombstone, assertRetired},
		{"retire-record-deleted", "retire", tombstone, assertRetired},
		{"retire-payload-deleted", "retire", tombstone, assertRetired},
		{"retire-intent-committed", "retire", func(t *testing.T, st *store.Store, g store.Generation) {
			if _, _, err := st.AcquireLease(g.ID, "held"); err != nil {
				t.Fatal(err)
			}
			tombstone(t, st, g)
		}, func(t *testing.T, dir string, st *store.Store, g store.Generation) {
			if got, err := st.Generation(g.ID); err != nil || got.State != store.Retiring || !payloadExists(t, dir, g.ID) {
				t.Errorf("generation = %+v, %v; want retiring, with its payload, while a lease is held", got, err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i)+"-"+tt.point, func(t *testing.T) {
			dir, st, host := openStore(t)
			g := publish(t, st, makeCapture(t, 16<<20, 1))
			if tt.prepare != nil {
				tt.prepare(t, st, g)
			}
			st.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
			cmd.Env = append(os.Environ(), "STORE_TEST_CRASH_DIR="+dir, "STORE_TEST_CRASH_OP="+tt.op, store.FailpointEnv+"="+tt.point)
			out, err := cmd.CombinedOutput()
			if !diedAtFailpoint(err) {
				t.Fatalf("child: got %v, want death by SIGKILL at %s; output:\n%s", err, tt.point, out)
			}
			if tt.point == "retire-record-deleted" && !payloadExists(t, dir, g.ID) {
				t.Fatal("payload already gone at retire-record-deleted: the fail point fired too late")
			}
			st = reopen(t, dir, host)
			tt.check(t, dir, st, g)
		})
	}
}

func tombstone(t *testing.T, st *store.Store, g store.Generation) {
	t.Helper()
	if _, err := st.Tombstone(g.ID, 1000); err != nil {
		t.Fatal(err)
	}
}
