package leasefs

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"templatefs/store"
)

// fakeProcs gives outcomes real processes cannot be made to give on
// demand: a process hidden from the daemon, one that survives SIGKILL.
type fakeProcs struct {
	mu       sync.Mutex
	identify error                // Identify's error, if any
	verdict  store.ExitVerdict    // what Check reports
	kill     func() (bool, error) // what Kill reports
	killed   int                  // Kill calls
}

func (p *fakeProcs) Identify(pid int) (store.ProcessIdentity, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return store.ProcessIdentity{PID: pid, StartTime: 1, BootID: "b0"}, p.identify
}

func (p *fakeProcs) Check(store.ProcessIdentity) (store.ExitVerdict, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.verdict, nil
}

func (p *fakeProcs) Kill(store.ProcessIdentity, time.Duration) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed++
	return p.kill()
}

// refusedOp runs o as a setup step that is expected to fail: its error is
// dropped, so seq goes on.
func refusedOp(o op) op {
	return func(fx *fixture) error {
		if o(fx) == nil {
			fx.t.Fatal("setup step succeeded, want a refusal")
		}
		return nil
	}
}

// TestProcessOutcomes: each outcome of the daemon's process checks gets
// its documented errno through the tree, and the lease state the
// lifecycle promises (docs/leases.md).
func TestProcessOutcomes(t *testing.T) {
	capture := makeCaptures(t)
	exits := func() (bool, error) { return true, nil }
	survives := func() (bool, error) { return false, nil }
	hidden := func() (bool, error) { return false, fmt.Errorf("kill: %w", store.ErrProcessUninspectable) }
	tests := []struct {
		name      string
		identify  error
		verdict   store.ExitVerdict
		kill      func() (bool, error)
		op        op
		want      Errno
		check     func(fx *fixture) error
		wantKills int
	}{
		{"bind hidden process", store.ErrProcessUninspectable, store.ProcessAlive, exits, write("leases/c1", "pid 42"), EPERM, leaseState("c1", store.Reserved), 0},
		{"bind exited process", store.ErrNoProcess, store.ProcessAlive, exits, write("leases/c1", "pid 42"), ESRCH, leaseState("c1", store.Reserved), 0},
		{"rm alive", nil, store.ProcessAlive, exits, remove("leases/c1"), EBUSY, leaseState("c1", store.Bound), 0},
		{"rm hidden", nil, store.ProcessUninspectable, exits, remove("leases/c1"), EPERM, all(leaseState("c1", store.Bound), refused(1, "unlink c1 EPERM")), 0},
		{"rm exited", nil, store.ProcessExited, exits, remove("leases/c1"), OK, noLease("c1"), 0},
		{"rm pid reused", nil, store.ProcessReused, exits, remove("leases/c1"), OK, noLease("c1"), 0},
		{"rm earlier boot", nil, store.ProcessEarlierBoot, exits, remove("leases/c1"), OK, noLease("c1"), 0},
		{"kill exits", nil, store.ProcessExited, exits, write("leases/c1", "kill\n"), OK, noLease("c1"), 1},
		{"kill survives", nil, store.ProcessAlive, survives, write("leases/c1", "kill\n"), ETIMEDOUT, all(leaseState("c1", store.TeardownFailed), refused(1, "write lease c1 ETIMEDOUT")), 1},
		{"kill hidden", nil, store.ProcessUninspectable, hidden, write("leases/c1", "kill\n"), EPERM, leaseState("c1", store.Bound), 1},
		{"rm after failed teardown", nil, store.ProcessAlive, survives, seq(remove("leases/c1"), refusedOp(write("leases/c1", "kill"))), EBUSY, leaseState("c1", store.TeardownFailed), 1},
		{"kill again after failed teardown", nil, store.ProcessAlive, survives, seq(write("leases/c1", "kill"), refusedOp(write("leases/c1", "kill"))), ETIMEDOUT, leaseState("c1", store.TeardownFailed), 2},
		{"kill the last lease of a retiring generation", nil, store.ProcessExited, exits, write("retiring/g000005/leases/c5", "kill"), OK, retired(5), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			procs := &fakeProcs{verdict: store.ProcessAlive, kill: exits}
			var bound []string
			if tt.identify == nil {
				bound = []string{"c1", "c5"}
			}
			fx := newFixtureWith(t, capture, procs, bound...)
			procs.mu.Lock()
			procs.identify, procs.verdict, procs.kill = tt.identify, tt.verdict, tt.kill
			procs.mu.Unlock()
			err := tt.op(fx)
			if got := ToErrno(err); got != tt.want {
				t.Fatalf("errno %v (%v), want %v", got, err, tt.want)
			}
			if err := tt.check(fx); err != nil {
				t.Error(err)
			}
			if procs.killed != tt.wantKills {
				t.Errorf("%d kills, want %d", procs.killed, tt.wantKills)
			}
		})
	}
}
