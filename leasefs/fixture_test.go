package leasefs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// captures are the two capture directories a fixture publishes: fresh
// (captured now, inside the restore window) and old (captured 40 days ago,
// outside OpenVMM's 30-day window). Both are small: a fixture publishes
// five generations per test row.
type captures struct{ fresh, old string }

// makeCaptures returns the captures of one test, reused across its rows.
func makeCaptures(t *testing.T) captures {
	t.Helper()
	o := manifest.SampleOptions{StateSizeBytes: 3000, MemorySizeBytes: 4 << 20, CaptureUTC: hostclock.Now()}
	fresh := capturetest.Make(t, t.TempDir(), o)
	o.CaptureUTC = o.CaptureUTC.Add(-40 * 24 * time.Hour)
	return captures{fresh: fresh, old: capturetest.Make(t, t.TempDir(), o)}
}

// fixture is a store in a fixed state:
//
//	g1 published,  lease "c1"
//	g2 tombstoned, lease "c2" (granted before the tombstone, by uid 1234)
//	g3 published,  no leases
//	g4 published,  ineligible (the old capture), no leases
//	g5 retiring,   lease "c5" keeps it (tombstoned by 1234, retired by 99)
type fixture struct {
	t        *testing.T
	dir      string // the store directory
	captures captures
	st       *store.Store
	fs       *FS
	gens     [6]store.Generation // gens[1..5]; index 0 unused
	now      time.Time
	caller   Caller          // who the ops of ops_test.go act as; owner unless a row says
	procs    store.Processes // nil: the host's
}

// owner is the store owner (the test's euid); other is a uid that is
// neither the owner nor root.
var (
	owner = Caller{UID: uint32(os.Geteuid())}
	other = Caller{UID: uint32(os.Geteuid()) + 1000}
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newFixture(t *testing.T, c captures) *fixture {
	t.Helper()
	return newFixtureWith(t, c, nil)
}

// newFixtureWith is newFixture with the store's Processes replaced by
// procs (nil: the host's), and the leases of bound bound to pid 42 right
// after they are granted (before g2 and g5 are tombstoned: a reserved
// lease on them can no longer be bound).
func newFixtureWith(t *testing.T, c captures, procs store.Processes, bound ...string) *fixture {
	t.Helper()
	fx := &fixture{t: t, dir: filepath.Join(t.TempDir(), "store"), captures: c, now: hostclock.Now().UTC().Truncate(time.Second), caller: owner, procs: procs}
	if err := store.Init(fx.dir); err != nil {
		t.Fatal(err)
	}
	fx.open()
	class := templatekey.SampleClass()
	for i, capture := range []string{1: c.fresh, 2: c.fresh, 3: c.fresh, 4: c.old, 5: c.fresh} {
		if i == 0 {
			continue
		}
		g, err := fx.st.Publish(capture, &class)
		if err != nil {
			t.Fatal(err)
		}
		fx.gens[i] = g
	}
	fx.acquire(1, "c1")
	fx.acquire(2, "c2")
	fx.acquire(5, "c5")
	for _, clone := range bound {
		if _, err := fx.st.BindLease(clone, 42); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{2, 5} {
		if _, err := fx.st.Tombstone(fx.gens[i].ID, 1234); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fx.st.Retire(fx.gens[5].ID, 99); err != nil {
		t.Fatal(err)
	}
	fx.refresh()
	return fx
}

// refresh reloads the generation records into gens.
func (fx *fixture) refresh() {
	fx.t.Helper()
	for i := 1; i < len(fx.gens); i++ {
		g, err := fx.st.Generation(fx.gens[i].ID)
		if err != nil {
			fx.t.Fatal(err)
		}
		fx.gens[i] = g
	}
}

// open opens the store with a clock that advances one second per call, so
// every record has a distinct, known time.
func (fx *fixture) open() {
	fx.t.Helper()
	st, err := store.Open(fx.dir, store.Options{Logger: quiet, Processes: fx.procs, Now: func() time.Time {
		fx.now = fx.now.Add(time.Second)
		return fx.now
	}})
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.st = st
	fx.t.Cleanup(func() { st.Close() })
	if fx.fs, err = New(st, Options{Logger: quiet}); err != nil {
		fx.t.Fatal(err)
	}
}

// reopen closes and opens the store again, as a daemon restart does.
func (fx *fixture) reopen() {
	fx.t.Helper()
	if err := fx.st.Close(); err != nil {
		fx.t.Fatal(err)
	}
	fx.open()
}

func (fx *fixture) acquire(i int, clone string) store.Lease {
	fx.t.Helper()
	l, _, err := fx.st.AcquireLease(fx.gens[i].ID, clone)
	if err != nil {
		fx.t.Fatal(err)
	}
	return l
}

// expand replaces KEY in path with the fixture's key ID.
// createClosed is open(O_CREAT|O_RDONLY) of name in dir by c, excl for
// O_EXCL, then close(2): the handle's Flush, where a new lease is
// acknowledged. It returns the create's error, else the close's.
func createClosed(f *FS, dir Node, name string, excl bool, c Caller) error {
	cr, err := f.Create(dir, name, OpenFlags{Exclusive: excl}, c)
	if err != nil {
		return err
	}
	defer cr.Handle.closeFiles()
	if cr.Handle.Commands == nil {
		return nil
	}
	return cr.Handle.Commands.Flush()
}

func (fx *fixture) expand(path string) string {
	return strings.ReplaceAll(path, "KEY", fx.gens[1].KeyID)
}

// walk resolves path (after expand) or fails the test.
func (fx *fixture) walk(path string) Node {
	fx.t.Helper()
	n, err := fx.fs.Walk(fx.expand(path))
	if err != nil {
		fx.t.Fatalf("Walk(%q): %v", path, err)
	}
	return n
}

// parent resolves the directory of path and returns it with the last element.
func (fx *fixture) parent(path string) (Node, string) {
	fx.t.Helper()
	dir, name := filepath.Split(fx.expand(path))
	if dir == "" {
		return fx.fs.Root(), name
	}
	return fx.walk(filepath.Clean(dir)), name
}

// walkTree lists every path below the root with its node, depth first.
func (fx *fixture) walkTree() map[string]Node {
	fx.t.Helper()
	out := map[string]Node{".": fx.fs.Root()}
	var rec func(prefix string, dir Node)
	rec = func(prefix string, dir Node) {
		entries, err := fx.fs.ReadDir(dir)
		if err != nil {
			fx.t.Fatalf("ReadDir(%s): %v", prefix, err)
		}
		for _, e := range entries {
			p := e.Name
			if prefix != "." {
				p = prefix + "/" + e.Name
			}
			out[p] = e.Node
			if e.Node.IsDir() {
				rec(p, e.Node)
			}
		}
	}
	rec(".", fx.fs.Root())
	return out
}
