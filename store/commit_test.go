package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/internal/hostclock"
	"templatefs/internal/sample"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// openLeaseStore opens a new store, logging nowhere, holding one published
// generation that its host finds eligible (one minute after capture, same
// boot).
func openLeaseStore(tb testing.TB) (*Store, Generation) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "store")
	if err := Init(dir); err != nil {
		tb.Fatal(err)
	}
	o := manifest.SampleOptions{MemorySizeBytes: 1 << 20, StateSizeBytes: 4096, VPCount: 2,
		CaptureUTC: hostclock.Now().Add(-time.Minute), CaptureMonotonicNs: 5e9}
	host := HostFunc(func() (HostFacts, error) {
		return HostFacts{HostClock: o.HostClock, MonotonicNs: 65e9, UTC: o.CaptureUTC.Add(time.Minute)}, nil
	})
	st, err := Open(dir, Options{Host: host, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	capture := filepath.Join(tb.TempDir(), "capture")
	if err := sample.WriteCapture(capture, o, 1); err != nil {
		tb.Fatal(err)
	}
	class := templatekey.SampleClass()
	g, err := st.Publish(capture, &class)
	if err != nil {
		tb.Fatal(err)
	}
	return st, g
}

// TestAcquireLeaseConcurrent runs many concurrent acquisitions, half by
// generation and half by key: every one must succeed, the fencing
// sequence numbers must be exactly 1..n (distinct, no gaps left by
// reruns), each goroutine must see its own increase strictly, and every
// lease must be in the index with the Seq its caller got.
func TestAcquireLeaseConcurrent(t *testing.T) {
	st, g := openLeaseStore(t)
	const workers, each = 16, 8
	seqs := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				clone := fmt.Sprintf("clone-%d-%d", w, i)
				var l Lease
				var created bool
				var err error
				if w%2 == 0 {
					l, created, err = st.AcquireLease(g.ID, clone)
				} else {
					l, created, err = st.AcquireLeaseByKey(g.KeyID, clone)
				}
				if err != nil || !created {
					t.Errorf("acquire %s: created %v, err %v", clone, created, err)
					return
				}
				seqs[w] = append(seqs[w], l.Seq)
			}
		})
	}
	wg.Wait()
	var all []uint64
	for w, s := range seqs {
		if !slices.IsSorted(s) || len(slices.Compact(slices.Clone(s))) != len(s) {
			t.Errorf("worker %d got Seq %v: want strictly increasing", w, s)
		}
		all = append(all, s...)
	}
	slices.Sort(all)
	for i, seq := range all {
		if seq != uint64(i+1) {
			t.Fatalf("sorted Seq %v: want 1..%d", all, workers*each)
		}
	}
	for w, s := range seqs {
		for i, seq := range s {
			l, err := st.Lease(fmt.Sprintf("clone-%d-%d", w, i))
			if err != nil || l.Seq != seq {
				t.Errorf("lease clone-%d-%d: Seq %d, err %v; caller got Seq %d", w, i, l.Seq, err, seq)
			}
		}
	}
}

// TestAcquireLeaseFailureAmongOthers holds a commit in flight so that good
// acquisitions queue behind it and run as one group, while failing ones
// are refused at their reservation, before the committer: they get their
// own errors, take no sequence number and write nothing; the others
// commit.
func TestAcquireLeaseFailureAmongOthers(t *testing.T) {
	st, g := openLeaseStore(t)
	if _, _, err := st.AcquireLease(g.ID, "taken"); err != nil {
		t.Fatal(err)
	}
	release := holdCommitter(t, st.commits)
	type result struct {
		clone string
		lease Lease
		err   error
	}
	calls := []struct {
		clone string
		gen   GenerationID
		want  error
	}{
		{"good-1", g.ID, nil},
		{"taken", g.ID + 1, ErrLeaseConflict},
		{"good-2", g.ID, nil},
		{"missing-gen", g.ID + 7, ErrNotFound},
		{"good-3", g.ID, nil},
	}
	results := make(chan result, len(calls))
	for _, c := range calls {
		go func() {
			l, _, err := st.AcquireLease(c.gen, c.clone)
			results <- result{c.clone, l, err}
		}()
	}
	waitPending(t, st.commits, 3) // the good ones
	release()
	got := map[string]result{}
	for range calls {
		r := <-results
		got[r.clone] = r
	}
	var seqs []uint64
	for _, c := range calls {
		r := got[c.clone]
		if !errors.Is(r.err, c.want) {
			t.Errorf("%s: err %v, want %v", c.clone, r.err, c.want)
		}
		if c.want == nil {
			seqs = append(seqs, r.lease.Seq)
		}
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []uint64{2, 3, 4}) {
		t.Errorf("good leases got Seq %v, want 2, 3, 4 (failures must consume none)", seqs)
	}
	if l, err := st.Lease("taken"); err != nil || l.Generation != g.ID || l.Seq != 1 {
		t.Errorf("lease taken: %+v, %v; want the original on %s with Seq 1", l, err, g.ID)
	}
	if _, err := st.Lease("missing-gen"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lease missing-gen: err %v, want ErrNotFound", err)
	}
}

// holdCommitter makes c busy with a request that stays inside its
// transaction until the returned function is called.
func holdCommitter(t *testing.T, c *groupCommitter) (release func()) {
	t.Helper()
	inside, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- c.update(func(*bolt.Tx) error { close(inside); <-hold; return nil })
	}()
	<-inside
	return func() {
		close(hold)
		if err := <-done; err != nil {
			t.Errorf("holding request: %v", err)
		}
	}
}

// waitPending waits until n requests are queued behind the one in flight.
func waitPending(t *testing.T, c *groupCommitter, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		queued := len(c.pending)
		c.mu.Unlock()
		if queued == n {
			return
		}
	}
	t.Fatalf("%d requests never queued", n)
}

// TestGroupCommitter queues requests behind one in flight, so they run as
// one group, and checks each request's outcome and what was committed.
func TestGroupCommitter(t *testing.T) {
	bucket := []byte("b")
	put := func(key string) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(key), []byte("v")) }
	}
	errOwn := errors.New("own failure")
	tests := []struct {
		name string
		fns  map[string]func(*bolt.Tx) error // key -> request; runs in key order
		errs map[string]error                // requests expected to fail
		keys []string                        // committed afterwards
	}{
		{
			name: "all succeed in one transaction",
			fns:  map[string]func(*bolt.Tx) error{"a": put("a"), "b": put("b"), "c": put("c")},
			keys: []string{"a", "b", "c"},
		},
		{
			name: "a failure after writing is rolled back alone",
			fns: map[string]func(*bolt.Tx) error{
				"a": put("a"),
				"b": func(tx *bolt.Tx) error {
					if err := put("b")(tx); err != nil {
						return err
					}
					return errOwn
				},
				"c": put("c"),
			},
			errs: map[string]error{"b": errOwn},
			keys: []string{"a", "c"},
		},
		{
			name: "a failure caused by an earlier request stays a failure",
			fns: map[string]func(*bolt.Tx) error{
				"a": put("a"),
				"b": func(tx *bolt.Tx) error {
					if tx.Bucket(bucket).Get([]byte("a")) != nil {
						return errOwn
					}
					return put("b")(tx)
				},
			},
			errs: map[string]error{"b": errOwn},
			keys: []string{"a"},
		},
		{
			name: "a failed request runs again after the others",
			fns: map[string]func(*bolt.Tx) error{
				"a": func(tx *bolt.Tx) error {
					if tx.Bucket(bucket).Get([]byte("b")) == nil {
						return errOwn
					}
					return put("a")(tx)
				},
				"b": put("b"),
			},
			keys: []string{"a", "b"},
		},
		{
			name: "every request fails",
			fns: map[string]func(*bolt.Tx) error{
				"a": func(*bolt.Tx) error { return errOwn },
				"b": func(*bolt.Tx) error { return errOwn },
			},
			errs: map[string]error{"a": errOwn, "b": errOwn},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openBolt(t, bucket)
			c := newGroupCommitter(db.Update)
			release := holdCommitter(t, c)
			results := make(map[string]chan error)
			for _, key := range slices.Sorted(maps.Keys(tt.fns)) {
				results[key] = make(chan error, 1)
				go func() { results[key] <- c.update(tt.fns[key]) }()
				waitPending(t, c, len(results)) // queue in key order
			}
			release()
			for key, ch := range results {
				if err := <-ch; !errors.Is(err, tt.errs[key]) {
					t.Errorf("request %s: err %v, want %v", key, err, tt.errs[key])
				}
			}
			var keys []string
			if err := db.View(func(tx *bolt.Tx) error {
				return tx.Bucket(bucket).ForEach(func(k, _ []byte) error { keys = append(keys, string(k)); return nil })
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys, tt.keys) {
				t.Errorf("committed keys %q, want %q", keys, tt.keys)
			}
		})
	}
}

// TestGroupCommitterShares checks that requests queued behind a commit in
// flight share one transaction: all see the same transaction ID.
func TestGroupCommitterShares(t *testing.T) {
	db := openBolt(t, []byte("b"))
	c := newGroupCommitter(db.Update)
	release := holdCommitter(t, c)
	const n = 10
	ids := make(chan int, n)
	for range n {
		go func() {
			var id int
			if err := c.update(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
				t.Error(err)
			}
			ids <- id
		}()
	}
	waitPending(t, c, n)
	release()
	first := <-ids
	for range n - 1 {
		if id := <-ids; id != first {
			t.Errorf("transaction IDs %d and %d: want one shared transaction", first, id)
		}
	}
}

// TestGroupCommitterPanic checks that a panic inside a group's transaction
// is taken for index damage: every request of the group fails with
// ErrIndexCorrupt (none is committed, and no panic reaches a caller), the
// store turns read-only, and later requests are refused with ErrReadOnly.
func TestGroupCommitterPanic(t *testing.T) {
	bucket := []byte("b")
	db := openBolt(t, bucket)
	c := newGroupCommitter(db.Update)
	release := holdCommitter(t, c)
	results := make(chan error, 2)
	go func() { results <- c.update(func(*bolt.Tx) error { panic("boom") }) }()
	waitPending(t, c, 1)
	go func() {
		results <- c.update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte("k"), []byte("v")) })
	}()
	waitPending(t, c, 2)
	release()
	for range 2 {
		if err := <-results; !errors.Is(err, ErrIndexCorrupt) || !strings.Contains(err.Error(), "boom") {
			t.Errorf("request in a group that panicked: %v, want ErrIndexCorrupt naming the panic", err)
		}
	}
	if err := db.st.ReadOnly(); !errors.Is(err, ErrReadOnly) || !errors.Is(err, ErrIndexCorrupt) {
		t.Errorf("ReadOnly after a panic = %v, want ErrReadOnly for ErrIndexCorrupt", err)
	}
	if err := c.update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte("k"), []byte("v")) }); !errors.Is(err, ErrReadOnly) {
		t.Errorf("update after a panic: %v, want ErrReadOnly", err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucket).Get([]byte("k")); v != nil {
			t.Errorf("key committed beside a panic: %q", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitterClosed checks that a transaction that cannot start
// fails every request with bbolt's error.
func TestGroupCommitterClosed(t *testing.T) {
	db := openBolt(t, []byte("b"))
	c := newGroupCommitter(db.Update)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.update(func(*bolt.Tx) error { return nil }); !errors.Is(err, bolt.ErrDatabaseNotOpen) {
		t.Errorf("update on a closed index: %v, want ErrDatabaseNotOpen", err)
	}
}

// openBolt opens a new bbolt file holding bucket, as the index of a
// Store value that has nothing else.
func openBolt(t *testing.T, bucket []byte) *index {
	t.Helper()
	raw, err := bolt.Open(filepath.Join(t.TempDir(), "test.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := &index{DB: raw, st: &Store{log: slog.New(slog.DiscardHandler), now: time.Now}}
	t.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		t.Fatal(err)
	}
	return db
}

func BenchmarkAcquireLeaseSerial_1(b *testing.B)  { benchmarkAcquireLease(b, 1, false) }
func BenchmarkAcquireLeaseSerial_8(b *testing.B)  { benchmarkAcquireLease(b, 8, false) }
func BenchmarkAcquireLeaseSerial_64(b *testing.B) { benchmarkAcquireLease(b, 64, false) }
func BenchmarkAcquireLeaseGroup_1(b *testing.B)   { benchmarkAcquireLease(b, 1, true) }
func BenchmarkAcquireLeaseGroup_8(b *testing.B)   { benchmarkAcquireLease(b, 8, true) }
func BenchmarkAcquireLeaseGroup_64(b *testing.B)  { benchmarkAcquireLease(b, 64, true) }

// benchmarkAcquireLease acquires b.N leases from callers concurrent
// goroutines, each lease committed by its own bbolt Update (serial) or
// through the group committer (group), and reports records/s. A group
// run also acquires b.N leases the serial way in the same run, on another
// store, in halves interleaved as group, serial, serial, group so that a
// drift in the disk's speed weighs on both alike; it reports
// serial-records/s and the ratio group/serial. Only group acquisitions
// are timed.
func benchmarkAcquireLease(b *testing.B, callers int, group bool) {
	b.StopTimer()
	serial, gs := openLeaseStore(b)
	if !group {
		elapsed := acquireFor(b, serial, gs.ID, serial.db.Update, callers, 0, b.N, true)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
		return
	}
	grouped, gg := openLeaseStore(b)
	half := b.N / 2
	tg := acquireFor(b, grouped, gg.ID, grouped.commits.update, callers, 0, half, true)
	ts := acquireFor(b, serial, gs.ID, serial.db.Update, callers, 0, half, false)
	ts += acquireFor(b, serial, gs.ID, serial.db.Update, callers, half, b.N, false)
	tg += acquireFor(b, grouped, gg.ID, grouped.commits.update, callers, half, b.N, true)
	rate, base := float64(b.N)/tg.Seconds(), float64(b.N)/ts.Seconds()
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(base, "serial-records/s")
	b.ReportMetric(rate/base, "group/serial")
}

// acquireFor acquires leases clone-<from> to clone-<to-1> on generation
// gen of st from callers goroutines committing through update, and
// returns the time taken. timed runs the benchmark timer meanwhile.
func acquireFor(b *testing.B, st *Store, gen GenerationID, update func(func(*bolt.Tx) error) error, callers, from, to int, timed bool) time.Duration {
	var wg sync.WaitGroup
	if timed {
		b.StartTimer()
	}
	start := time.Now()
	for w := range callers {
		wg.Go(func() {
			for i := from + w; i < to; i += callers {
				if _, _, err := st.acquireLease(gen, fmt.Sprintf("clone-%d", i), update); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if timed {
		b.StopTimer()
	}
	return elapsed
}
