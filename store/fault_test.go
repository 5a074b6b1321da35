package store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/internal/hostclock"
	"templatefs/internal/sample"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// faultFixture is one fault row's store: generation g, published and
// eligible, with the Reserved lease "held"; a second capture not yet
// published; a real process to bind leases to.
type faultFixture struct {
	dir     string
	opts    Options
	st      *Store
	g       Generation
	g2      Generation // published by setups that need a second generation
	capture string
	procs   *faultProcesses
	log     *lockedBuffer
	proc    *exec.Cmd
	errno   syscall.Errno // the errno the row's point is armed with
	restore string        // Restore's target, for the restore rows
	index   string        // an index snapshot, for the restore rows
}

// faultProcesses is the host's Processes, except that Kill can be made
// to report a process that survived SIGKILL, which no real process does
// on demand.
type faultProcesses struct {
	Processes
	survive bool
}

func (p *faultProcesses) Kill(id ProcessIdentity, wait time.Duration) (bool, error) {
	if p.survive {
		return false, nil
	}
	return p.Processes.Kill(id, wait)
}

// lockedBuffer collects log output from any goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// faultCapture writes a sample capture made an hour ago (relative to now,
// never a fixed date) and returns its directory and options.
func faultCapture(t *testing.T, seed uint64) (string, manifest.SampleOptions) {
	t.Helper()
	o := manifest.SampleOptions{MemorySizeBytes: 1 << 20, StateSizeBytes: 4096, VPCount: 2,
		CaptureUTC: hostclock.Now().UTC().Add(-time.Hour).Truncate(time.Second), CaptureMonotonicNs: 5e9}
	dir := filepath.Join(t.TempDir(), "capture")
	if err := sample.WriteCapture(dir, o, seed); err != nil {
		t.Fatal(err)
	}
	return dir, o
}

func newFaultFixture(t *testing.T) *faultFixture {
	t.Helper()
	f := &faultFixture{dir: filepath.Join(t.TempDir(), "store"), log: &lockedBuffer{}}
	if err := Init(f.dir); err != nil {
		t.Fatal(err)
	}
	first, o := faultCapture(t, 1)
	f.capture, _ = faultCapture(t, 2)
	f.procs = &faultProcesses{Processes: hostProcesses()}
	f.opts = Options{
		Logger:    slog.New(slog.NewTextHandler(f.log, nil)),
		Processes: f.procs,
		// The host as the capture saw it, a minute later: eligible.
		Host: HostFunc(func() (HostFacts, error) {
			return HostFacts{HostClock: o.HostClock, MonotonicNs: 65e9, UTC: o.CaptureUTC.Add(time.Minute)}, nil
		}),
	}
	f.open(t)
	f.g = f.publish(t, first)
	if _, _, err := f.st.AcquireLease(f.g.ID, "held"); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *faultFixture) open(t *testing.T) {
	t.Helper()
	st, err := Open(f.dir, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	t.Cleanup(func() { st.Close() })
}

func (f *faultFixture) publish(t *testing.T, capture string) Generation {
	t.Helper()
	class := templatekey.SampleClass()
	g, err := f.st.Publish(capture, &class)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// sleeper starts a real process to bind leases to; it is killed at the
// end of the test.
func (f *faultFixture) sleeper(t *testing.T) int {
	t.Helper()
	f.proc = exec.Command("sleep", "1000")
	if err := f.proc.Start(); err != nil {
		t.Fatal(err)
	}
	proc := f.proc
	t.Cleanup(func() { proc.Process.Kill(); proc.Wait() })
	return proc.Process.Pid
}

// launched starts a sleeper that carries held's launch ID in its
// environment (store.LaunchEnv), as an orchestrator starts a clone.
func (f *faultFixture) launched(t *testing.T) {
	t.Helper()
	l, err := f.st.Lease("held")
	if err != nil {
		t.Fatal(err)
	}
	f.proc = exec.Command("sleep", "1000")
	f.proc.Env = append(os.Environ(), LaunchEnv+"="+l.LaunchID)
	if err := f.proc.Start(); err != nil {
		t.Fatal(err)
	}
	proc := f.proc
	t.Cleanup(func() { proc.Process.Kill(); proc.Wait() })
}

// bindHeld binds "held" to a new sleeper; exited makes it exit (and be
// reaped) afterwards, so that a release finds it gone.
func (f *faultFixture) bindHeld(t *testing.T, exited bool) {
	t.Helper()
	if _, err := f.st.BindLease("held", f.sleeper(t)); err != nil {
		t.Fatal(err)
	}
	if exited {
		f.proc.Process.Kill()
		f.proc.Wait()
	}
}

// tombstonedG2 publishes the second capture as g2 and tombstones it.
func (f *faultFixture) tombstonedG2(t *testing.T) {
	t.Helper()
	f.g2 = f.publish(t, f.capture)
	if _, err := f.st.Tombstone(f.g2.ID, 0); err != nil {
		t.Fatal(err)
	}
}

// snapshotForRestore writes an index snapshot of the store for Restore.
func (f *faultFixture) snapshotForRestore(t *testing.T) {
	t.Helper()
	snap, _, err := f.st.SnapshotIndex()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	f.index = filepath.Join(t.TempDir(), "store.db")
	out, err := os.Create(f.index)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.ReadFrom(snap); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	f.restore = filepath.Join(t.TempDir(), "restored")
}

func (f *faultFixture) restoreStore() error {
	return Restore(f.restore, f.index, func(g Generation, a Artifact) (*os.File, error) {
		return os.Open(filepath.Join(f.dir, PayloadDir, g.ID.String(), a.Name))
	})
}

// dumpIndex returns every bucket and key/value pair of the index (not the
// bucket sequences: a publication's reserved ID is burned on purpose).
func dumpIndex(t *testing.T, st *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		out[path+"/"] = "bucket"
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(path+"/"+hex.EncodeToString(k), b.Bucket(k))
			}
			out[path+"/"+hex.EncodeToString(k)] = string(v)
			return nil
		})
	}
	if err := st.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// entries lists a directory of the store ("payload", "staging").
func (f *faultFixture) entries(t *testing.T, sub string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(f.dir, sub))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// arm arms error point p with errno for the rest of the test.
func arm(t *testing.T, p faultPoint, errno syscall.Errno) {
	t.Cleanup(disarm)
	armed = armedPoint{fault: p, errno: errno}
}

func disarm() { armed = armedPoint{} }

// faultRow is one error point reached by one operation.
type faultRow struct {
	name  string // the error point's name, with /variant when several rows share it
	setup func(f *faultFixture, t *testing.T)
	op    func(f *faultFixture) error
	// readOnly: the failed step was an fsync or a commit, after which the
	// store must refuse every change until reopened.
	readOnly bool
	// logged: the operation succeeds, having acknowledged a first part
	// (a retirement's intent, a lease's removal); the failure of the
	// rest is logged and finished by the next Open.
	logged bool
	// expect checks the index right after the failure instead of "equal
	// to the index before the operation", for states a failure leaves on
	// purpose (a lease still Releasing, a retirement pending).
	expect func(t *testing.T, f *faultFixture)
	// damage is the problem kinds the setup made on purpose: Check finds
	// them after the reopen, then repairs them.
	damage []string
	// after runs on the reopened store, instead of checking that payload/
	// holds what it held before the operation.
	after func(t *testing.T, f *faultFixture)
}

func faultRows() []faultRow {
	publish := func(f *faultFixture) error {
		class := templatekey.SampleClass()
		_, err := f.st.Publish(f.capture, &class)
		return err
	}
	leaseState := func(state LeaseState) func(t *testing.T, f *faultFixture) {
		return func(t *testing.T, f *faultFixture) {
			if l, err := f.st.Lease("held"); err != nil || l.State != state {
				t.Errorf("lease held after the failure: %+v, %v; want state %s", l, err, state)
			}
		}
	}
	releaseHeld := func(t *testing.T, f *faultFixture) {
		if err := f.st.ReleaseLease("held"); err != nil {
			t.Errorf("release of held after the reopen: %v", err)
		}
	}
	g2Retiring := func(t *testing.T, f *faultFixture) {
		if g, err := f.st.Generation(f.g2.ID); err != nil || g.State != Retiring {
			t.Errorf("g2 after the failed deletion: %+v, %v; want retiring", g, err)
		}
	}
	g2Deleted := func(t *testing.T, f *faultFixture) {
		if _, err := f.st.Generation(f.g2.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("g2 after its record's deletion: %v, want ErrNotFound", err)
		}
	}
	g2Gone := func(t *testing.T, f *faultFixture) {
		g2Deleted(t, f)
		if got := f.entries(t, PayloadDir); !slices.Equal(got, []string{f.g.ID.String()}) {
			t.Errorf("payload/ after the reopen holds %q, want only %s", got, f.g.ID)
		}
	}
	retireG2 := func(f *faultFixture) error { _, err := f.st.Retire(f.g2.ID, 0); return err }
	unexpectedFile := func(f *faultFixture, t *testing.T) {
		if err := os.WriteFile(filepath.Join(f.dir, PayloadDir, f.g.ID.String(), "extra"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	repair := func(f *faultFixture) error { _, err := f.st.Check(CheckOptions{Repair: true}); return err }
	restore := func(f *faultFixture) error { return f.restoreStore() }
	restored := func(t *testing.T, f *faultFixture) {
		if _, err := os.Lstat(f.restore); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a failed restore left %s: %v", f.restore, err)
		}
		if es, _ := os.ReadDir(filepath.Dir(f.restore)); len(es) != 0 {
			t.Errorf("a failed restore left %s in %s", es[0].Name(), filepath.Dir(f.restore))
		}
	}
	restoreAgain := func(t *testing.T, f *faultFixture) {
		if err := f.restoreStore(); err != nil {
			t.Fatalf("restore without the fault: %v", err)
		}
		st, err := Open(f.restore, f.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if problems, err := st.Check(CheckOptions{Digests: true}); err != nil || len(problems) != 0 {
			t.Errorf("check of the restored store: %v, %v", problems, err)
		}
	}
	restoreRow := func(name string) faultRow {
		return faultRow{name: name, setup: (*faultFixture).snapshotForRestore, op: restore, expect: restored, after: restoreAgain}
	}

	return []faultRow{
		{name: "publish-reserve-commit", op: publish, readOnly: true},
		{name: "payload-write/publish", op: publish},
		{name: "payload-fsync/publish", op: publish, readOnly: true},
		{name: "publish-fsync-staging", op: publish, readOnly: true},
		{name: "publish-rename", op: publish},
		{name: "publish-fsync-parents", op: publish, readOnly: true},
		{name: "publish-commit", op: publish, readOnly: true},
		{
			name: "lease-commit/generation", readOnly: true,
			op: func(f *faultFixture) error { _, _, err := f.st.AcquireLease(f.g.ID, "new"); return err },
		},
		{
			name: "lease-commit/key", readOnly: true,
			op: func(f *faultFixture) error { _, _, err := f.st.AcquireLeaseByKey(f.g.KeyID, "new"); return err },
		},
		{
			// Concurrent acquisitions share commits: every one fails,
			// with the errno or, once the store is read-only, ErrReadOnly.
			name: "lease-commit/group", readOnly: true,
			op: func(f *faultFixture) error {
				errs := make([]error, 8)
				var wg sync.WaitGroup
				for i := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _, errs[i] = f.st.AcquireLease(f.g.ID, "new-"+string(rune('a'+i)))
					}()
				}
				wg.Wait()
				var failed error // the failed commit itself, not a later refusal
				for _, err := range errs {
					switch {
					case !errors.Is(err, f.errno):
						return fmt.Errorf("a concurrent acquisition: %v, want the %v (or ErrReadOnly for it)", err, f.errno)
					case failed == nil && !errors.Is(err, ErrReadOnly):
						failed = err
					}
				}
				if failed == nil {
					return errors.New("every concurrent acquisition was refused as read-only, none saw the failed commit")
				}
				return failed
			},
		},
		{
			name: "bind-commit", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) { f.sleeper(t) },
			op:    func(f *faultFixture) error { _, err := f.st.BindLease("held", f.proc.Process.Pid); return err },
		},
		{
			name: "cancel-commit", readOnly: true,
			op: func(f *faultFixture) error { return f.st.CancelLease("held") },
		},
		{
			name: "autobind-commit", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) { f.launched(t) },
			op: func(f *faultFixture) error {
				_, matched, err := f.st.BindLaunched(f.g.ID, f.proc.Process.Pid)
				if err == nil && !matched {
					return errors.New("the launched process matched no lease")
				}
				return err
			},
		},
		{
			name: "release-begin-commit/bound", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) { f.bindHeld(t, true) },
			op:    func(f *faultFixture) error { return f.st.ReleaseLease("held") },
		},
		{
			// Releasing is committed, the exit verified, the deletion
			// fails: the lease stays Releasing, and a release after the
			// restart finishes it.
			name: "release-finish-commit/bound", readOnly: true,
			setup:  func(f *faultFixture, t *testing.T) { f.bindHeld(t, true) },
			op:     func(f *faultFixture) error { return f.st.ReleaseLease("held") },
			expect: leaseState(Releasing), after: releaseHeld,
		},
		{
			name: "release-begin-commit/kill", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) { f.bindHeld(t, false) },
			op:    func(f *faultFixture) error { return f.st.KillLease("held", 10*time.Second) },
		},
		{
			name: "release-finish-commit/kill", readOnly: true,
			setup:  func(f *faultFixture, t *testing.T) { f.bindHeld(t, false) },
			op:     func(f *faultFixture) error { return f.st.KillLease("held", 10*time.Second) },
			expect: leaseState(Releasing), after: releaseHeld,
		},
		{
			// The process survives SIGKILL; recording teardown-failed
			// fails: the lease stays Bound.
			name: "lease-state-commit/kill", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) { f.bindHeld(t, false); f.procs.survive = true },
			op:    func(f *faultFixture) error { return f.st.KillLease("held", 0) },
		},
		{
			// The exit of held's process is found at the start of
			// tracking; recording it fails: the lease stays Bound, and
			// the next start records it.
			name: "exit-commit", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) { f.bindHeld(t, true) },
			op:    func(f *faultFixture) error { return f.st.reconcileExits(nil) },
			after: func(t *testing.T, f *faultFixture) {
				if err := f.st.reconcileExits(nil); err != nil {
					t.Errorf("exits at the start after the reopen: %v", err)
				}
				leaseState(Exited)(t, f)
				releaseHeld(t, f)
			},
		},
		{
			name: "tombstone-commit", readOnly: true,
			op: func(f *faultFixture) error { _, err := f.st.Tombstone(f.g.ID, 0); return err },
		},
		{
			name: "fleet-queue-commit", readOnly: true,
			op: func(f *faultFixture) error {
				_, err := f.st.QueueFleet(FleetQueued{FleetID: f.g.FleetID(), Tombstone: true})
				return err
			},
		},
		{
			name: "fleet-view-commit", readOnly: true,
			op: func(f *faultFixture) error { return f.st.ResyncFleet(3, map[string][]byte{}) },
		},
		{
			name: "lift-commit", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) {
				if _, err := f.st.Tombstone(f.g.ID, 0); err != nil {
					t.Fatal(err)
				}
			},
			op: func(f *faultFixture) error { _, err := f.st.Lift(f.g.ID); return err },
		},
		{name: "retire-intent-commit", readOnly: true, setup: (*faultFixture).tombstonedG2, op: retireG2},
		{
			// The intent commits (Retire succeeds); the deletion's commit
			// fails and is logged; the next Open finishes it.
			name: "retire-delete-commit/retire", readOnly: true, logged: true,
			setup: (*faultFixture).tombstonedG2, op: retireG2, expect: g2Retiring, after: g2Gone,
		},
		{
			// The release of the last lease of a retiring generation
			// commits; deleting the generation fails.
			name: "retire-delete-commit/release", readOnly: true, logged: true,
			setup: func(f *faultFixture, t *testing.T) {
				f.g2 = f.publish(t, f.capture)
				if _, _, err := f.st.AcquireLease(f.g2.ID, "last"); err != nil {
					t.Fatal(err)
				}
				if _, err := f.st.Tombstone(f.g2.ID, 0); err != nil {
					t.Fatal(err)
				}
				if _, err := f.st.Retire(f.g2.ID, 0); err != nil {
					t.Fatal(err)
				}
			},
			op: func(f *faultFixture) error { return f.st.CancelLease("last") },
			expect: func(t *testing.T, f *faultFixture) {
				g2Retiring(t, f)
				if _, err := f.st.Lease("last"); !errors.Is(err, ErrNotFound) {
					t.Errorf("lease last after its release: %v, want ErrNotFound", err)
				}
			},
			after: g2Gone,
		},
		{
			name: "retire-remove-payload", logged: true,
			setup: (*faultFixture).tombstonedG2, op: retireG2, expect: g2Deleted, after: g2Gone,
		},
		{
			name: "retire-fsync-payload", readOnly: true, logged: true,
			setup: (*faultFixture).tombstonedG2, op: retireG2, expect: g2Deleted, after: g2Gone,
		},
		{
			name: "settings-commit", readOnly: true,
			op: func(f *faultFixture) error { return f.st.SetSettings(Settings{RestoreWindow: time.Hour}) },
		},
		{
			name: "repair-index-commit", readOnly: true,
			setup: func(f *faultFixture, t *testing.T) {
				if err := f.st.db.Update(func(tx *bolt.Tx) error {
					return tx.Bucket(bucketGenerationLeases).Bucket(genKey(f.g.ID)).Delete([]byte("held"))
				}); err != nil {
					t.Fatal(err)
				}
			},
			op: repair, damage: []string{ProblemLeaseIndexMissing},
		},
		{name: "repair-remove", setup: unexpectedFile, op: repair, damage: []string{ProblemArtifactUnexpected}},
		// The removal happened; only its fsync failed.
		{name: "repair-fsync", readOnly: true, setup: unexpectedFile, op: repair},
		restoreRow("payload-write/restore"),
		restoreRow("payload-fsync/restore"),
		restoreRow("restore-write-index"),
		restoreRow("restore-fsync-index"),
		restoreRow("restore-fsync-payload"),
		restoreRow("restore-fsync-dirs"),
		restoreRow("restore-rename"),
		restoreRow("restore-fsync-parent"),
	}
}

// TestFaultTable checks that every error point has a row in faultRows
// and every row names an error point, so that a new point cannot be added
// untested.
func TestFaultTable(t *testing.T) {
	covered := map[faultPoint]bool{}
	for _, r := range faultRows() {
		name, _, _ := strings.Cut(r.name, "/")
		p, ok := faultPointNamed(name)
		if !ok {
			t.Errorf("row %s names no error point", r.name)
		}
		covered[p] = true
	}
	for p := noFault + 1; p < numFaultPoints; p++ {
		if faultPointNames[p] == "" {
			t.Errorf("error point %d has no name", p)
		}
		if !covered[p] {
			t.Errorf("error point %s has no row in faultRows", p)
		}
	}
}

// TestFaults drives every error point with ENOSPC and with EIO: the
// operation fails with an error matching the errno (or, where it had
// already acknowledged a first part, succeeds and logs it); the index
// reads back as before; a failed fsync or commit makes the store refuse
// every change with ErrReadOnly while reads go on; and after a reopen the
// store is writable and Check finds nothing.
func TestFaults(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
		for _, r := range faultRows() {
			t.Run(r.name+"/"+errnoName(errno), func(t *testing.T) { runFaultRow(t, r, errno) })
		}
	}
}

func errnoName(e syscall.Errno) string {
	for name, v := range faultErrnos {
		if v == e {
			return name
		}
	}
	return e.Error()
}

func runFaultRow(t *testing.T, r faultRow, errno syscall.Errno) {
	f := newFaultFixture(t)
	if r.setup != nil {
		r.setup(f, t)
	}
	before := dumpIndex(t, f.st)
	payload, staging := f.entries(t, PayloadDir), f.entries(t, StagingDir)
	name, _, _ := strings.Cut(r.name, "/")
	p, _ := faultPointNamed(name)

	f.errno = errno
	arm(t, p, errno)
	err := r.op(f)
	switch {
	case r.logged && err != nil:
		t.Fatalf("%s: %v; want success with the failure of the rest logged", r.name, err)
	case r.logged && !strings.Contains(f.log.String(), errno.Error()):
		t.Errorf("%s succeeded, but the log does not mention %q:\n%s", r.name, errno.Error(), f.log.String())
	case !r.logged && !errors.Is(err, errno):
		t.Fatalf("%s: err %v, want one matching %s", r.name, err, errnoName(errno))
	case !r.logged:
		t.Logf("%s failed: %v", r.name, err)
	}
	disarm() // what follows must fail by the store's state, not the fault

	if r.readOnly {
		ro := f.st.ReadOnly()
		if !errors.Is(ro, ErrReadOnly) || !errors.Is(ro, errno) {
			t.Errorf("store after a failed fsync or commit: ReadOnly() = %v, want ErrReadOnly with the %s", ro, errnoName(errno))
		}
		if err := f.st.SetSettings(DefaultSettings()); !errors.Is(err, ErrReadOnly) {
			t.Errorf("settings on the read-only store: %v, want ErrReadOnly", err)
		}
		if _, _, err := f.st.AcquireLease(f.g.ID, "later"); !errors.Is(err, ErrReadOnly) {
			t.Errorf("lease on the read-only store: %v, want ErrReadOnly", err)
		}
		if _, err := f.st.Tombstone(f.g.ID, 0); !errors.Is(err, ErrReadOnly) {
			t.Errorf("tombstone on the read-only store: %v, want ErrReadOnly", err)
		}
		if _, err := f.st.Generations(); err != nil {
			t.Errorf("reading generations of the read-only store: %v", err)
		}
		if _, err := f.st.Info(); err != nil {
			t.Errorf("reading the read-only store's info: %v", err)
		}
	} else if ro := f.st.ReadOnly(); ro != nil {
		t.Errorf("store after a failure that changed nothing on disk: %v, want it writable", ro)
	}
	if r.expect != nil {
		r.expect(t, f)
	} else if after := dumpIndex(t, f.st); !mapsEqual(before, after) {
		t.Errorf("index changed although nothing was acknowledged:\nbefore %v\nafter  %v", before, after)
	}
	if got := f.entries(t, StagingDir); !slices.Equal(got, staging) {
		t.Errorf("staging/ holds %q after the failure, %q before", got, staging)
	}

	// A restart reads the store again from disk and accepts changes.
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	f.open(t)
	if ro := f.st.ReadOnly(); ro != nil {
		t.Errorf("reopened store: %v, want it writable", ro)
	}
	problems, err := f.st.Check(CheckOptions{Digests: true, Repair: true})
	if err != nil {
		t.Fatalf("check after the reopen: %v", err)
	}
	var kinds []string
	for _, pr := range problems {
		kinds = append(kinds, pr.Kind)
	}
	if !slices.Equal(kinds, r.damage) {
		t.Errorf("check after the reopen found %q, want %q (the setup's own damage)", problems, r.damage)
	}
	if problems, err := f.st.Check(CheckOptions{Digests: true}); err != nil || len(problems) != 0 {
		t.Errorf("check after the repair: %q, %v; want a clean store", problems, err)
	}
	if err := f.st.SetSettings(Settings{RestoreWindow: 2 * time.Hour}); err != nil {
		t.Errorf("settings on the reopened store: %v", err)
	}
	if r.after != nil {
		r.after(t, f)
	} else if got := f.entries(t, PayloadDir); !slices.Equal(got, payload) {
		t.Errorf("payload/ after the reopen holds %q, before the failure %q", got, payload)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestParseFailpoint checks how FailpointEnv values arm points: a bare
// name arms a kill point, <error point>:<errno> an error point, and a
// value naming no error point or an unknown errno arms nothing.
func TestParseFailpoint(t *testing.T) {
	for _, c := range []struct {
		value string
		want  armedPoint
	}{
		{"", armedPoint{}},
		{"lease-committed", armedPoint{kill: "lease-committed"}},
		{"lease-commit:ENOSPC", armedPoint{fault: faultLeaseCommit, errno: syscall.ENOSPC}},
		{"payload-fsync:EIO", armedPoint{fault: faultPayloadFsync, errno: syscall.EIO}},
		{"lease-committed:EIO", armedPoint{}}, // a kill point takes no errno
		{"lease-commit:EPERM", armedPoint{}},
		{"lease-commit:", armedPoint{}},
	} {
		if got := parseFailpoint(c.value); got != c.want {
			t.Errorf("parseFailpoint(%q) = %+v, want %+v", c.value, got, c.want)
		}
	}
}
