//go:build linux

// Lease binding against real processes: sleep(1), /proc, pidfds, zombies.

package store_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"templatefs/internal/hostclock"
	"templatefs/store"
)

// Environment of a lease child: STORE_TEST_CHILD_LEASE names the store
// and STORE_TEST_CHILD_OP the operation: "bind <clone> <pid>",
// "release <clone>" or "kill <clone>".
const (
	childLeaseEnv = "STORE_TEST_CHILD_LEASE"
	childOpEnv    = "STORE_TEST_CHILD_OP"
)

// init runs before TestMain: in a lease child this binary stands in for
// the daemon, performs one lease operation and exits, so crash tests can
// SIGKILL a real process at a fail point (TestMain's publish child is the
// same idea).
func init() {
	dir := os.Getenv(childLeaseEnv)
	if dir == "" {
		return
	}
	if err := childLeaseOp(dir, strings.Fields(os.Getenv(childOpEnv))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func childLeaseOp(dir string, op []string) error {
	st, err := store.Open(dir, store.Options{Host: sampleHost()})
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case len(op) == 3 && op[0] == "bind":
		pid, err := strconv.Atoi(op[2])
		if err != nil {
			return err
		}
		_, err = st.BindLease(op[1], pid)
		return err
	case len(op) == 2 && op[0] == "release":
		return st.ReleaseLease(op[1])
	case len(op) == 2 && op[0] == "kill":
		return st.KillLease(op[1], 10*time.Second)
	}
	return fmt.Errorf("%s=%q: unknown operation", childOpEnv, op)
}

// sleeper is a real process for a lease to bind to.
type sleeper struct {
	cmd    *exec.Cmd
	reaped bool
}

func startSleeper(t *testing.T) *sleeper {
	t.Helper()
	s := &sleeper{cmd: exec.Command("sleep", "60")}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.reap() })
	return s
}

func (s *sleeper) pid() int { return s.cmd.Process.Pid }

// zombie kills the process and waits until it has exited without
// reaping it (waitid WNOWAIT): it stays a zombie of this test process.
func (s *sleeper) zombie(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, s.pid(), &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
}

// reap kills the process if needed and reaps it, returning how it ended.
func (s *sleeper) reap() error {
	if s.reaped {
		return nil
	}
	s.reaped = true
	s.cmd.Process.Kill()
	return s.cmd.Wait()
}

// alive reports whether the process still runs, from /proc state.
func (s *sleeper) alive(t *testing.T) bool {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid()))
	if err != nil {
		return false
	}
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// identityOf reads pid's identity the way proc(5) and pidfd_open(2)
// describe it, independently of the store's code.
func identityOf(t *testing.T, pid int) store.ProcessIdentity {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	start, err := strconv.ParseUint(fields[22-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	id := store.ProcessIdentity{PID: pid, StartTime: start, BootID: strings.ReplaceAll(strings.TrimSpace(string(boot)), "-", "")}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(fd, &sfs) == nil && sfs.Type == unix.PID_FS_MAGIC && unix.Fstat(fd, &st) == nil {
		id.PidfsIno = st.Ino
	}
	return id
}

// newBindStore makes a store with one published generation and a Reserved
// lease for clone "clone-a", and reopens it with opts (with the sample
// host if opts names none, as every reopen here does: no store in these
// tests meets the real host's clock).
func newBindStore(t *testing.T, opts store.Options) (string, *store.Store) {
	t.Helper()
	dir, st := newStore(t)
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	if _, _, err := st.AcquireLease(g.ID, "clone-a"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	return dir, reopenWithOptions(t, dir, opts)
}

func reopenWithOptions(t *testing.T, dir string, opts store.Options) *store.Store {
	t.Helper()
	if opts.Host == nil {
		opts.Host = sampleHost()
	}
	st, err := store.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// rewriteLeaseRecord closes st, rewrites the lease record of cloneID with
// bbolt directly, and reopens the store.
func rewriteLeaseRecord(t *testing.T, dir string, st *store.Store, cloneID string, edit func(*store.Lease)) *store.Store {
	t.Helper()
	st.Close()
	db, err := bolt.Open(filepath.Join(dir, store.IndexFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		l, err := store.GetLeaseRow(tx, cloneID)
		if err != nil {
			return err
		}
		edit(&l)
		return store.PutLeaseRow(tx, l)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return reopenWithOptions(t, dir, store.Options{})
}

func mustGetLease(t *testing.T, st *store.Store, cloneID string) store.Lease {
	t.Helper()
	l, err := st.Lease(cloneID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestBindLease(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	p := startSleeper(t)
	before := hostclock.Now().UTC()
	l, err := st.BindLease("clone-a", p.pid())
	if err != nil {
		t.Fatal(err)
	}
	want := identityOf(t, p.pid())
	if l.State != store.Bound || l.Process == nil || *l.Process != want {
		t.Fatalf("bound lease %+v (process %+v): want state bound, process %+v", l, l.Process, want)
	}
	if l.BoundAt.Before(before) || l.UpdatedAt != l.BoundAt {
		t.Errorf("BoundAt %v, UpdatedAt %v: want both the bind time, after %v", l.BoundAt, l.UpdatedAt, before)
	}
	if got := mustGetLease(t, st, "clone-a"); got.State != store.Bound || *got.Process != want || !got.BoundAt.Equal(l.BoundAt) {
		t.Errorf("stored lease %+v: want the bound record", got)
	}
	again, err := st.BindLease("clone-a", p.pid())
	if err != nil || again.State != store.Bound || *again.Process != want || !again.UpdatedAt.Equal(l.UpdatedAt) {
		t.Errorf("second bind to the same process = %+v, %v; want the lease unchanged", again, err)
	}
	other := startSleeper(t)
	if _, err := st.BindLease("clone-a", other.pid()); !errors.Is(err, store.ErrLeaseBound) {
		t.Errorf("bind to another process: got %v, want ErrLeaseBound", err)
	}
}

// TestBindLeaseRefusals checks each refusal on a Reserved lease and that
// the lease stays Reserved.
func TestBindLeaseRefusals(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	zombie := startSleeper(t)
	zombie.zombie(t)
	thread := 0
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tasks {
		if tid, _ := strconv.Atoi(e.Name()); tid != os.Getpid() {
			thread = tid
		}
	}
	live := startSleeper(t)
	kthreadd := 2 // the kernel's thread creator, PID 2 on Linux
	tests := []struct {
		name  string
		clone string
		pid   int
		want  error
	}{
		{"pid zero", "clone-a", 0, store.ErrInvalidID},
		{"negative pid", "clone-a", -1, store.ErrInvalidID},
		{"init", "clone-a", 1, store.ErrInvalidID},
		{"kernel thread", "clone-a", kthreadd, store.ErrInvalidID},
		{"this process", "clone-a", os.Getpid(), store.ErrInvalidID},
		{"no such pid", "clone-a", 1 << 30, store.ErrNoProcess},
		{"thread, not a process", "clone-a", thread, store.ErrNoProcess},
		{"zombie", "clone-a", zombie.pid(), store.ErrNoProcess},
		{"no lease", "clone-b", live.pid(), store.ErrNotFound},
		{"bad clone ID", "a/b", live.pid(), store.ErrInvalidID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := st.BindLease(tt.clone, tt.pid); !errors.Is(err, tt.want) {
				t.Errorf("BindLease(%q, %d): got %v, want %v", tt.clone, tt.pid, err, tt.want)
			}
			if l := mustGetLease(t, st, "clone-a"); l.State != store.Reserved || l.Process != nil {
				t.Errorf("lease after refusal %+v: want it reserved, no process", l)
			}
		})
	}
}

// TestReleaseOutcomes binds a real process and releases the lease after
// each way the process can have ended, or not.
func TestReleaseOutcomes(t *testing.T) {
	tests := []struct {
		name string
		// setup acts on the bound process p and may rewrite the record.
		setup func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store
		want  error // nil: released
		// processLives: the process must still run after the release
		// (release never signals).
		processLives bool
	}{
		{"process gone", func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store {
			p.reap()
			return st
		}, nil, false},
		{"process a zombie", func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store {
			p.zombie(t)
			return st
		}, nil, false},
		{"pid reused, pidfs inode differs", func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store {
			if identityOf(t, p.pid()).PidfsIno == 0 {
				t.Skip("kernel has no pidfs")
			}
			return rewriteLeaseRecord(t, dir, st, "clone-a", func(l *store.Lease) { l.Process.PidfsIno++ })
		}, nil, true},
		{"pid reused, start time differs", func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store {
			return rewriteLeaseRecord(t, dir, st, "clone-a", func(l *store.Lease) { l.Process.PidfsIno, l.Process.StartTime = 0, l.Process.StartTime-1 })
		}, nil, true},
		{"earlier boot", func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store {
			return rewriteLeaseRecord(t, dir, st, "clone-a", func(l *store.Lease) { l.Process.BootID = strings.Repeat("0", 31) + "1" })
		}, nil, true},
		{"live process", func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store {
			return st
		}, store.ErrProcessAlive, true},
		{"live process, no pidfs in the record", func(t *testing.T, dir string, st *store.Store, p *sleeper) *store.Store {
			return rewriteLeaseRecord(t, dir, st, "clone-a", func(l *store.Lease) { l.Process.PidfsIno = 0 })
		}, store.ErrProcessAlive, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, st := newBindStore(t, store.Options{})
			p := startSleeper(t)
			if tt.setup != nil {
				if _, err := st.BindLease("clone-a", p.pid()); err != nil {
					t.Fatal(err)
				}
				st = tt.setup(t, dir, st, p)
			}
			before := mustGetLease(t, st, "clone-a")
			err := st.ReleaseLease("clone-a")
			if !errors.Is(err, tt.want) {
				t.Fatalf("ReleaseLease: got %v, want %v", err, tt.want)
			}
			after, lerr := st.Lease("clone-a")
			switch {
			case tt.want == nil && !errors.Is(lerr, store.ErrNotFound):
				t.Errorf("after release: %+v, %v; want ErrNotFound", after, lerr)
			case tt.want != nil && (lerr != nil || after.State != store.Bound || *after.Process != *before.Process):
				t.Errorf("after refused release: %+v, %v; want the lease bound to %+v", after, lerr, before.Process)
			}
			if tt.want == nil {
				if held, err := st.Leases(); err != nil || len(held) != 0 {
					t.Errorf("Leases() = %+v, %v; want none", held, err)
				}
			}
			if got := p.alive(t); got != tt.processLives {
				t.Errorf("process alive after release: %v, want %v", got, tt.processLives)
			}
		})
	}
}

// TestReleaseConcurrent runs releases in parallel on one bound lease:
// while the process lives every call refuses and the record ends Bound,
// never stuck in Releasing; once it is gone the lease is removed and each
// call succeeds or finds it already gone.
func TestReleaseConcurrent(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	p := startSleeper(t)
	if _, err := st.BindLease("clone-a", p.pid()); err != nil {
		t.Fatal(err)
	}
	run := func() []error {
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() { errs <- st.ReleaseLease("clone-a") }()
		}
		out := make([]error, 0, cap(errs))
		for range cap(errs) {
			out = append(out, <-errs)
		}
		return out
	}
	for _, err := range run() {
		if !errors.Is(err, store.ErrProcessAlive) {
			t.Errorf("release of a live process: got %v, want ErrProcessAlive", err)
		}
	}
	if l := mustGetLease(t, st, "clone-a"); l.State != store.Bound {
		t.Errorf("state after refused releases %q, want %q", l.State, store.Bound)
	}
	p.reap()
	released := 0
	for _, err := range run() {
		switch {
		case err == nil:
			released++
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("release of an exited process: got %v, want nil or ErrNotFound", err)
		}
	}
	if _, err := st.Lease("clone-a"); !errors.Is(err, store.ErrNotFound) || released == 0 {
		t.Errorf("after releases: lease lookup %v, %d calls succeeded; want ErrNotFound and at least one", err, released)
	}
}

func TestKillLease(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	p := startSleeper(t)
	if _, err := st.BindLease("clone-a", p.pid()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := st.KillLease("clone-a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("KillLease took %v: the wait should end when the process exits", elapsed)
	}
	if _, err := st.Lease("clone-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after kill: got %v, want ErrNotFound", err)
	}
	var ee *exec.ExitError
	if err := p.reap(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("sleep ended with %v, want SIGKILL", err)
	}
	g, err := st.Generation(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AcquireLease(g.ID, "clone-r"); err != nil {
		t.Fatal(err)
	}
	if err := st.KillLease("clone-r", time.Second); !errors.Is(err, store.ErrLeaseReserved) {
		t.Errorf("kill of a reserved lease: %v, want ErrLeaseReserved", err)
	}
	if l, err := st.Lease("clone-r"); err != nil || l.State != store.Reserved {
		t.Errorf("reserved lease after kill: got %+v, %v; want it reserved", l, err)
	}
	if err := st.KillLease("clone-x", time.Second); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("kill of no lease: got %v, want ErrNotFound", err)
	}
}

// fakeProcesses answers with fixed outcomes that real processes cannot
// give a root test: an uninspectable process (root may inspect all) and
// one that survives SIGKILL (none does in userspace).
type fakeProcesses struct {
	verdict    store.ExitVerdict
	killExited bool
	killErr    error
}

var fakeIdentity = store.ProcessIdentity{PID: 4242, PidfsIno: 7, StartTime: 99, BootID: strings.Repeat("ab", 16)}

func (f *fakeProcesses) Identify(pid int) (store.ProcessIdentity, error) {
	return fakeIdentity, nil
}

func (f *fakeProcesses) Check(store.ProcessIdentity) (store.ExitVerdict, error) {
	return f.verdict, nil
}

func (f *fakeProcesses) Kill(store.ProcessIdentity, time.Duration) (bool, error) {
	return f.killExited, f.killErr
}

func TestReleaseUninspectable(t *testing.T) {
	fake := &fakeProcesses{verdict: store.ProcessUninspectable}
	_, st := newBindStore(t, store.Options{Processes: fake})
	if _, err := st.BindLease("clone-a", fakeIdentity.PID); err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseLease("clone-a"); !errors.Is(err, store.ErrProcessUninspectable) {
		t.Errorf("release: got %v, want ErrProcessUninspectable", err)
	}
	if l := mustGetLease(t, st, "clone-a"); l.State != store.Bound || *l.Process != fakeIdentity {
		t.Errorf("lease after refusal %+v: want it bound to %+v", l, fakeIdentity)
	}
}

func TestKillLeaseTeardownFailed(t *testing.T) {
	tests := []struct {
		name      string
		fake      fakeProcesses
		want      error
		wantState store.LeaseState
	}{
		{"survives SIGKILL", fakeProcesses{verdict: store.ProcessAlive}, store.ErrTeardownFailed, store.TeardownFailed},
		{"cannot be signalled", fakeProcesses{verdict: store.ProcessAlive, killErr: syscall.EPERM}, store.ErrTeardownFailed, store.TeardownFailed},
		{"uninspectable", fakeProcesses{verdict: store.ProcessUninspectable, killErr: store.ErrProcessUninspectable}, store.ErrProcessUninspectable, store.Bound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := tt.fake
			_, st := newBindStore(t, store.Options{Processes: &fake})
			if _, err := st.BindLease("clone-a", fakeIdentity.PID); err != nil {
				t.Fatal(err)
			}
			if err := st.KillLease("clone-a", time.Millisecond); !errors.Is(err, tt.want) {
				t.Fatalf("KillLease: got %v, want %v", err, tt.want)
			}
			l := mustGetLease(t, st, "clone-a")
			if l.State != tt.wantState || l.Process == nil || *l.Process != fakeIdentity {
				t.Fatalf("lease %+v: want state %s, process kept", l, tt.wantState)
			}
			if err := st.ReleaseLease("clone-a"); err == nil {
				t.Fatal("release while the fake process lives: got nil")
			}
			if l := mustGetLease(t, st, "clone-a"); l.State != tt.wantState {
				t.Errorf("state after refused release %q, want %q kept", l.State, tt.wantState)
			}
			fake.verdict = store.ProcessExited
			if err := st.ReleaseLease("clone-a"); err != nil {
				t.Errorf("release once the process exited: %v", err)
			}
		})
	}
}

// TestBoundLeaseReattach closes and reopens the store (a daemon restart)
// under a bound lease: the record, identity and verification survive.
func TestBoundLeaseReattach(t *testing.T) {
	dir, st := newBindStore(t, store.Options{})
	p := startSleeper(t)
	bound, err := st.BindLease("clone-a", p.pid())
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = reopenWithOptions(t, dir, store.Options{})
	got := mustGetLease(t, st, "clone-a")
	if got.Process == nil || *got.Process != *bound.Process || got.Seq != bound.Seq || got.State != store.Bound ||
		!got.BoundAt.Equal(bound.BoundAt) || !got.UpdatedAt.Equal(bound.UpdatedAt) || got.LaunchID != bound.LaunchID {
		t.Fatalf("after reopen %+v (process %+v); want %+v (process %+v)", got, got.Process, bound, bound.Process)
	}
	if err := st.ReleaseLease("clone-a"); !errors.Is(err, store.ErrProcessAlive) {
		t.Errorf("release after reopen: got %v, want ErrProcessAlive", err)
	}
	p.reap()
	if err := st.ReleaseLease("clone-a"); err != nil {
		t.Errorf("release after the process exited: %v", err)
	}
}

// TestLeaseCrash kills a real daemon stand-in (this binary re-executed) at
// each bind, release and kill fail point, reopens the store and checks
// what the record says and that verification still works.
func TestLeaseCrash(t *testing.T) {
	tests := []struct {
		point string
		// op is the child's operation; bind binds the lease first in this
		// process; exited makes the process exit before the child runs.
		op           string
		bind, exited bool
		wantState    store.LeaseState // "" means no lease
		// thenRelease is ReleaseLease's result after reopening, with
		// the process still in the state the child left it.
		thenRelease error
	}{
		{"bind-committed", "bind", false, false, store.Bound, store.ErrProcessAlive},
		{"release-marked", "release", true, true, store.Releasing, nil},
		{"release-committed", "release", true, true, "", store.ErrNotFound},
		{"kill-signalled", "kill", true, false, store.Bound, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/exited=%v", tt.point, tt.exited), func(t *testing.T) {
			dir, st := newBindStore(t, store.Options{})
			p := startSleeper(t)
			want := identityOf(t, p.pid())
			if tt.bind {
				if _, err := st.BindLease("clone-a", p.pid()); err != nil {
					t.Fatal(err)
				}
			}
			if tt.exited {
				p.reap()
			}
			st.Close()
			op := tt.op + " clone-a"
			if tt.op == "bind" {
				op += " " + strconv.Itoa(p.pid())
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childLeaseEnv+"="+dir, childOpEnv+"="+op, store.FailpointEnv+"="+tt.point)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child %q: got %v (%s), want death by SIGKILL at %s", op, err, out, tt.point)
			}
			st = reopenWithOptions(t, dir, store.Options{})
			l, err := st.Lease("clone-a")
			switch {
			case tt.wantState == "" && !errors.Is(err, store.ErrNotFound):
				t.Fatalf("after crash: %+v, %v; want no lease", l, err)
			case tt.wantState != "" && (err != nil || l.State != tt.wantState || l.Process == nil || *l.Process != want):
				t.Fatalf("after crash: %+v (process %+v), %v; want state %s bound to %+v", l, l.Process, err, tt.wantState, want)
			}
			if tt.op == "kill" {
				if err := p.reap(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Errorf("sleep ended with %v, want the child's SIGKILL", err)
				}
			}
			if err := st.ReleaseLease("clone-a"); !errors.Is(err, tt.thenRelease) {
				t.Fatalf("release after reopen: got %v, want %v", err, tt.thenRelease)
			}
			if errors.Is(tt.thenRelease, store.ErrProcessAlive) {
				if l := mustGetLease(t, st, "clone-a"); l.State != store.Bound {
					t.Errorf("state after refused release %q, want %q", l.State, store.Bound)
				}
				p.reap()
				if err := st.ReleaseLease("clone-a"); err != nil {
					t.Errorf("release after the process exited: %v", err)
				}
			}
		})
	}
}

// TestRefusedReleaseWritesNothing checks that a release refused because
// the bound process lives changes neither the record nor the index file:
// the process is checked before the lease is marked Releasing.
func TestRefusedReleaseWritesNothing(t *testing.T) {
	dir, st := newBindStore(t, store.Options{})
	p := startSleeper(t)
	if _, err := st.BindLease("clone-a", p.pid()); err != nil {
		t.Fatal(err)
	}
	before := mustGetLease(t, st, "clone-a")
	index := filepath.Join(dir, store.IndexFile)
	fi, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseLease("clone-a"); !errors.Is(err, store.ErrProcessAlive) {
		t.Fatalf("release of a live process: got %v, want ErrProcessAlive", err)
	}
	if after := mustGetLease(t, st, "clone-a"); !reflect.DeepEqual(after, before) {
		t.Errorf("lease after a refused release %+v, want %+v", after, before)
	}
	if fi2, err := os.Stat(index); err != nil || !fi2.ModTime().Equal(fi.ModTime()) || fi2.Size() != fi.Size() {
		t.Errorf("index file changed by a refused release: %v then %v (%v)", fi.ModTime(), fi2.ModTime(), err)
	}
}

// TestReleaseFinishesRetirement checks that the release of the last lease
// of a retiring generation, once its process has exited, deletes the
// generation, and that a refused release does not.
func TestReleaseFinishesRetirement(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	p := startSleeper(t)
	if _, err := st.BindLease("clone-a", p.pid()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Tombstone(1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retire(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseLease("clone-a"); !errors.Is(err, store.ErrProcessAlive) {
		t.Fatalf("release of a live process: got %v, want ErrProcessAlive", err)
	}
	if _, err := st.Generation(1); err != nil {
		t.Fatalf("generation after refused release: %v, want it kept (a lease remains)", err)
	}
	p.reap()
	if err := st.ReleaseLease("clone-a"); err != nil {
		t.Fatal(err)
	}
	if g, err := st.Generation(1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retiring generation after its last release: %+v, %v; want ErrNotFound", g, err)
	}
}

// TestStaleSequenceRefused: once clone-a's lease is released and acquired
// again, bind, kill and release by the old lease's sequence number touch
// nothing and say ErrNotFound, so a stale handle never reaches the newer
// lease of the same clone ID.
func TestStaleSequenceRefused(t *testing.T) {
	_, st := newBindStore(t, store.Options{})
	old := mustGetLease(t, st, "clone-a")
	if err := st.CancelLease("clone-a"); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := st.AcquireLease(old.Generation, "clone-a")
	if err != nil {
		t.Fatal(err)
	}
	p := startSleeper(t)
	if _, err := st.BindLeaseSeq("clone-a", old.Seq, p.pid()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bind by the old sequence: got %v, want ErrNotFound", err)
	}
	if err := st.KillLeaseSeq("clone-a", old.Seq, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("kill by the old sequence: got %v, want ErrNotFound", err)
	}
	if err := st.ReleaseLeaseSeq("clone-a", old.Seq); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("release by the old sequence: got %v, want ErrNotFound", err)
	}
	if got := mustGetLease(t, st, "clone-a"); got != fresh {
		t.Errorf("newer lease after stale requests %+v, want %+v unchanged", got, fresh)
	}
	if _, err := st.BindLeaseSeq("clone-a", fresh.Seq, p.pid()); err != nil {
		t.Errorf("bind by the current sequence: %v", err)
	}
}
