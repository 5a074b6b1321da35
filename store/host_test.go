package store_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"templatefs/internal/hostclock"
	"templatefs/internal/sample"
	"templatefs/store"
	"templatefs/store/templatekey"
)

// The anchors of every sample capture (sampleOptions). The wall-clock
// anchor is an hour before the test started, on the clock the store reads
// (hostclock), so a store opened with the real host finds it in its window
// on any date.
var (
	captureUTC  = hostclock.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	captureMono = uint64(123e9)
	hostA       = [16]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	hostB       = [16]byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	bootA       = [16]byte{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}
	bootB       = [16]byte{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeHost is a store.Host whose facts a test sets.
type fakeHost struct {
	mu    sync.Mutex
	facts store.HostFacts
	err   error
}

func (h *fakeHost) Facts() (store.HostFacts, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.facts, h.err
}

func (h *fakeHost) set(f store.HostFacts) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.facts, h.err = f, nil
}

// sameBoot is the capture's host and boot, age after the capture on its
// monotonic clock. The wall clock was stepped back half an hour since the
// capture: within any restore window the tests set (the anchors agree),
// yet the UTC rule would answer otherwise at the window's edges, so only
// the monotonic rule gives the results the tests expect.
func sameBoot(age time.Duration) store.HostFacts {
	return store.HostFacts{HostID: hostA, BootID: bootA, HostClock: "linux-boottime",
		MonotonicNs: uint64(int64(captureMono) + int64(age)), UTC: captureUTC.Add(age - 30*time.Minute)}
}

// afterReboot is the capture's host in another boot, age after the
// capture by the wall clock; the monotonic clock has just started.
func afterReboot(age time.Duration) store.HostFacts {
	return store.HostFacts{HostID: hostA, BootID: bootB, HostClock: "linux-boottime", MonotonicNs: 1e9, UTC: captureUTC.Add(age)}
}

// otherHost is another host, age after the capture by the wall clock. It
// shares the capture's boot ID and monotonic reading, so only the host ID
// tells it apart.
func otherHost(age time.Duration) store.HostFacts {
	return store.HostFacts{HostID: hostB, BootID: bootA, HostClock: "linux-boottime", MonotonicNs: captureMono, UTC: captureUTC.Add(age)}
}

// otherClock is the capture's host and boot with another clock kind, age
// after the capture by the wall clock; the monotonic reading equals the
// capture's, so the monotonic rule would find age 0.
func otherClock(age time.Duration) store.HostFacts {
	return store.HostFacts{HostID: hostA, BootID: bootA, HostClock: "windows-interrupt-time", MonotonicNs: captureMono, UTC: captureUTC.Add(age)}
}

// sampleHost is a fakeHost in the sample captures' boot, one hour after
// their capture.
func sampleHost() *fakeHost {
	h := &fakeHost{}
	h.set(sameBoot(time.Hour))
	return h
}

// openStore makes a new store and opens it on a fakeHost set to the
// capture's boot, one hour after the capture.
func openStore(t *testing.T) (string, *store.Store, *fakeHost) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	host := sampleHost()
	return dir, reopen(t, dir, host), host
}

func reopen(t *testing.T, dir string, host store.Host) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{Host: host, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// publishVersion publishes a new capture of manifest version 5 or 6 under
// the sample class of that version (its contracts.snapshot must match).
func publishVersion(t *testing.T, st *store.Store, version uint32, seed uint64) store.Generation {
	t.Helper()
	class := templatekey.SampleClass()
	class.Contracts.Snapshot = version
	g, err := st.Publish(makeCaptureVersion(t, version, seed), &class)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// makeCaptureVersion is makeCapture for manifest version 5 or 6.
func makeCaptureVersion(t *testing.T, version uint32, seed uint64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture")
	if err := sample.WriteCapture(dir, sampleOptions(version, 16<<20), seed); err != nil {
		t.Fatal(err)
	}
	return dir
}
