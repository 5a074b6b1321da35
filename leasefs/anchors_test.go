package leasefs

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// TestCreateRefusesDisagreeingAnchors: a capture of this host's boot whose
// wall-clock and monotonic ages drift apart by more than the restore
// window gets no lease through the tree, by generation or by key: EPERM,
// and status says why.
func TestCreateRefusesDisagreeingAnchors(t *testing.T) {
	now := hostclock.Now().UTC()
	const mono = uint64(1000 * time.Hour)
	var mu sync.Mutex
	facts := store.HostFacts{HostID: [16]byte{7}, BootID: [16]byte{8}, HostClock: manifest.HostClockLinuxBoottime, MonotonicNs: mono, UTC: now}
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{Logger: quiet, Host: store.HostFunc(func() (store.HostFacts, error) {
		mu.Lock()
		defer mu.Unlock()
		return facts, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	capture := capturetest.Make(t, t.TempDir(), manifest.SampleOptions{StateSizeBytes: 3000, MemorySizeBytes: 4 << 20,
		CaptureUTC: now, CaptureMonotonicNs: mono, HostID: facts.HostID, BootID: facts.BootID})
	class := templatekey.SampleClass()
	g, err := st.Publish(capture, &class)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(st, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// An hour later by the monotonic clock, 31 days later by the wall clock.
	mu.Lock()
	facts.MonotonicNs += uint64(time.Hour)
	facts.UTC = facts.UTC.Add(31 * 24 * time.Hour)
	mu.Unlock()

	const why = "the capture's wall-clock and monotonic anchors disagree by 743h, more than the 720h restore window"
	for _, dirPath := range []string{"generations/" + g.ID.String() + "/leases", "keys/" + g.KeyID + "/leases"} {
		d, err := f.Walk(dirPath)
		if err != nil {
			t.Fatal(err)
		}
		err = createClosed(f, d, "clone", false, owner)
		if e := ToErrno(err); e != EPERM || !strings.Contains(err.Error(), why) {
			t.Errorf("create %s/clone: %v (%s), want EPERM saying %q", dirPath, err, e, why)
		}
	}
	if leases, err := st.Leases(); err != nil || len(leases) != 0 {
		t.Errorf("refused creates left %d leases (%v)", len(leases), err)
	}
	status, err := f.Walk("generations/" + g.ID.String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	text, err := f.content(status)
	if err != nil || !strings.Contains(string(text), "new_leases: refused (EPERM): ineligible: "+why) {
		t.Errorf("status = %q, %v; want new_leases refused saying %q", text, err, why)
	}
}
