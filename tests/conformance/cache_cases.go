//go:build linux

package conformance

import (
	"os"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// testAttrCache measures how many LOOKUP and GETATTR requests reach the
// backend for repeated stats of an immutable payload, through an open
// payload/ directory (fstatat: one lookup each) and an open file (fstat:
// one getattr each). Immutable nodes may be cached for long
// (leasefs.Node.Immutable), so a caching backend sees none; one whose
// FUSE layer drops the timeouts sees every stat.
func testAttrCache(t *testing.T, b Backend) {
	var requests atomic.Int64
	e := newEnvWith(t, b, MountOptions{Requests: &requests}, t.TempDir())
	dir, err := os.Open(e.path("generations/g000001/payload"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	f, err := os.Open(e.path("generations/g000001/payload/state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stat := func() {
		var st unix.Stat_t
		if err := unix.Fstatat(int(dir.Fd()), "state.bin", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
	}
	stat() // warm the caches
	const rounds = 50
	before := requests.Load()
	for range rounds {
		stat()
	}
	got := requests.Load() - before
	t.Logf("%s: %d LOOKUP/GETATTR requests for %d fstatat and %d fstat of an immutable payload", b.Name, got, rounds, rounds)
	switch {
	case b.UncachedAttrs && got < 2*rounds:
		t.Errorf("%d requests, want at least %d: the kernel caches after all; revisit docs/windows.md, \"Timeouts\"", got, 2*rounds)
	case !b.UncachedAttrs && got != 0:
		t.Errorf("%d requests, want 0: immutable payloads must be served from the kernel's cache", got)
	}
}
