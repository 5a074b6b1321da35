//go:build linux

// Binding by launch ID and explicit cancel, against real processes that
// carry TEMPLATEFS_LAUNCH_ID in their environment.

package store_test

import (
	"errors"
	"os"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"templatefs/store"
)

// startLaunched starts sleep(1) with env added to this process's
// environment, as an orchestrator starts a clone.
func startLaunched(t *testing.T, env ...string) *sleeper {
	t.Helper()
	s := &sleeper{cmd: exec.Command("sleep", "60")}
	s.cmd.Env = append(os.Environ(), env...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.reap() })
	return s
}

func launchEnv(l store.Lease) string { return store.LaunchEnv + "=" + l.LaunchID }

// TestBindLaunched: a process carrying a reserved lease's launch ID binds
// it at BindLaunched of the lease's generation, once; other processes,
// other generations and unknown launch IDs bind nothing.
func TestBindLaunched(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	l := mustGetLease(t, st, "clone-a")

	plain := startSleeper(t)
	if _, matched, err := st.BindLaunched(l.Generation, plain.pid()); err != nil || matched {
		t.Errorf("process without a launch ID: matched %v, %v; want no match", matched, err)
	}
	stranger := startLaunched(t, store.LaunchEnv+"=00000000000000000000000000000000")
	if _, matched, err := st.BindLaunched(l.Generation, stranger.pid()); err != nil || matched {
		t.Errorf("unknown launch ID: matched %v, %v; want no match", matched, err)
	}
	p := startLaunched(t, launchEnv(l))
	if _, matched, err := st.BindLaunched(l.Generation+1, p.pid()); err != nil || matched {
		t.Errorf("another generation: matched %v, %v; want no match", matched, err)
	}
	if got := mustGetLease(t, st, "clone-a"); got.State != store.Reserved {
		t.Fatalf("lease after opens that match nothing: %+v; want reserved", got)
	}

	bound, matched, err := st.BindLaunched(l.Generation, p.pid())
	if err != nil || !matched || bound.State != store.Bound || bound.Process == nil || bound.Process.PID != p.pid() {
		t.Fatalf("BindLaunched = %+v, %v, %v; want bound to pid %d", bound, matched, err, p.pid())
	}
	again, matched, err := st.BindLaunched(l.Generation, p.pid())
	if err != nil || !matched || !reflect.DeepEqual(again, bound) {
		t.Errorf("second open = %+v, %v, %v; want the lease unchanged", again, matched, err)
	}
	// A second process with the same launch ID (a helper the clone
	// started) opens without binding.
	helper := startLaunched(t, launchEnv(l))
	if got, matched, err := st.BindLaunched(l.Generation, helper.pid()); err != nil || !matched || !reflect.DeepEqual(got, bound) {
		t.Errorf("another carrier's open = %+v, %v, %v; want the lease unchanged", got, matched, err)
	}
}

// TestBindLaunchedRechecksEligibility: a generation tombstoned, or outside
// its restore window, since the lease was granted refuses the bind with
// the reason, and the lease stays reserved; so does `pid N`.
func TestBindLaunchedRechecksEligibility(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, st *store.Store, gen store.GenerationID)
		want   error
	}{
		{"tombstoned", func(t *testing.T, st *store.Store, gen store.GenerationID) {
			if _, err := st.Tombstone(gen, 0); err != nil {
				t.Fatal(err)
			}
		}, store.ErrTombstoned},
		{"outside the window", func(t *testing.T, st *store.Store, gen store.GenerationID) {
			if err := st.SetSettings(store.Settings{RestoreWindow: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}, store.ErrIneligible},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, st := newBindStore(t, store.Options{})
			l := mustGetLease(t, st, "clone-a")
			tt.change(t, st, l.Generation)
			p := startLaunched(t, launchEnv(l))
			if _, matched, err := st.BindLaunched(l.Generation, p.pid()); !matched || !errors.Is(err, tt.want) {
				t.Errorf("BindLaunched: matched %v, %v; want %v", matched, err, tt.want)
			}
			if _, err := st.BindLease("clone-a", p.pid()); !errors.Is(err, tt.want) {
				t.Errorf("BindLease: %v; want %v", err, tt.want)
			}
			if got := mustGetLease(t, st, "clone-a"); !reflect.DeepEqual(got, l) {
				t.Errorf("lease after the refusals: %+v; want %+v", got, l)
			}
		})
	}
}

// TestCancelLease: release and kill refuse a reserved lease; cancel is
// refused while a process carries the launch ID and ends the lease once
// none does; a bound lease is not cancelled.
func TestCancelLease(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	l := mustGetLease(t, st, "clone-a")
	if err := st.ReleaseLease("clone-a"); !errors.Is(err, store.ErrLeaseReserved) {
		t.Errorf("release of a reserved lease: %v; want ErrLeaseReserved", err)
	}
	if err := st.KillLease("clone-a", time.Second); !errors.Is(err, store.ErrLeaseReserved) {
		t.Errorf("kill of a reserved lease: %v; want ErrLeaseReserved", err)
	}
	carrier := startLaunched(t, launchEnv(l))
	if err := st.CancelLease("clone-a"); !errors.Is(err, store.ErrLaunchInUse) {
		t.Errorf("cancel while pid %d carries the launch ID: %v; want ErrLaunchInUse", carrier.pid(), err)
	}
	if got := mustGetLease(t, st, "clone-a"); !reflect.DeepEqual(got, l) {
		t.Fatalf("lease after the refusals: %+v; want %+v", got, l)
	}
	carrier.reap()
	if err := st.CancelLease("clone-a"); err != nil {
		t.Fatalf("cancel once no process carries the launch ID: %v", err)
	}
	if _, err := st.Lease("clone-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after cancel: %v; want ErrNotFound", err)
	}
	if err := st.CancelLease("clone-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second cancel: %v; want ErrNotFound", err)
	}

	if _, _, err := st.AcquireLease(l.Generation, "clone-b"); err != nil {
		t.Fatal(err)
	}
	p := startSleeper(t)
	if _, err := st.BindLease("clone-b", p.pid()); err != nil {
		t.Fatal(err)
	}
	if err := st.CancelLease("clone-b"); !errors.Is(err, store.ErrLeaseBound) {
		t.Errorf("cancel of a bound lease: %v; want ErrLeaseBound", err)
	}
}
