//go:build linux

package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/tests/harness"
)

// crashed reports whether a templatefs process died of a panic or a fatal
// runtime error rather than exiting with a message.
func crashed(r harness.Result) bool {
	return r.Signal != 0 || r.Code == 2 || strings.Contains(r.Stderr, "goroutine ") || strings.Contains(r.Stderr, "fatal error")
}

// TestDamagedIndexRefused cuts a store's index.db short, as a copy cut
// short does: fsck (with and without --repair), mount and every other
// command that opens the store exit 1 with one message naming the file,
// the damage and `templatefs restore`; fsck prints it as index-corrupt,
// and nothing touches the file.
func TestDamagedIndexRefused(t *testing.T) {
	s := newSession(t)
	s.publish(t)
	index := filepath.Join(s.store, "index.db")
	if err := os.Truncate(index, 3*4096+100); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"fsck":        {"fsck", s.store},
		"fsck repair": {"fsck", "--repair", "--digests", s.store},
		"mount":       {"mount", s.store, s.mnt},
		"settings":    {"settings", s.store},
		"publish":     {"publish", s.store, s.capture, "--class", s.class},
	} {
		t.Run(name, func(t *testing.T) {
			r := harness.RunStatus(t, args...)
			if crashed(r) || r.Code != 1 {
				t.Fatalf("templatefs %s: %v; want exit 1 with a message", strings.Join(args, " "), r)
			}
			for _, want := range []string{"index is damaged", index, "it was cut short", "templatefs restore"} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
				}
			}
			if args[0] == "fsck" && !strings.HasPrefix(r.Stdout, "index-corrupt index.db: ") {
				t.Errorf("fsck stdout %q, want an index-corrupt line", r.Stdout)
			}
			if after, err := os.ReadFile(index); err != nil || !bytes.Equal(after, before) {
				t.Errorf("index.db changed (%v)", err)
			}
		})
	}
	if harness.IsMounted(t, s.mnt) {
		t.Errorf("%s is mounted after a refused mount", s.mnt)
	}
}

// TestDamagedIndexWhileMounted cuts index.db short under a running
// daemon: the daemon keeps running, the operations that meet the damage
// fail with EIO, MNT/store says read_only with the reason, the log says
// it once, and the daemon stops cleanly. A restart refuses the store.
func TestDamagedIndexWhileMounted(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t)
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt)
	if got := harness.MustTool(t, "cat", s.path("store")); !strings.Contains(got, "read_only: no\n") {
		t.Errorf("store of a healthy mount lacks read_only: no:\n%s", got)
	}
	if err := os.Truncate(filepath.Join(s.store, "index.db"), 2*4096); err != nil {
		t.Fatal(err)
	}
	if r := harness.Tool(t, "touch", s.path("generations", gen, "leases", "clone-after")); r.Code == 0 ||
		!(strings.Contains(r.Stderr, "Input/output error") || strings.Contains(r.Stderr, "Read-only file system")) {
		t.Errorf("touch a lease in a damaged store: %v; want EIO or EROFS", r)
	}
	got := harness.MustTool(t, "cat", s.path("store"))
	if !strings.HasPrefix(got, "read_only: store is read-only since ") || !strings.Contains(got, "index is damaged") {
		t.Errorf("cat store after the damage = %q, want the read_only line with the reason", got)
	}
	if r := harness.Tool(t, "touch", s.path("generations", gen, "leases", "clone-later")); r.Code == 0 ||
		!(strings.Contains(r.Stderr, "Input/output error") || strings.Contains(r.Stderr, "Read-only file system")) {
		t.Errorf("touch a lease in a read-only store: %v; want EIO or EROFS", r)
	}
	if n := strings.Count(d.Log(), "store is read-only from now on"); n != 1 {
		t.Errorf("daemon logged the read-only line %d times, want once:\n%s", n, d.Log())
	}
	d.Stop()
	if r := harness.RunStatus(t, "mount", s.store, s.mnt); crashed(r) || r.Code != 1 || !strings.Contains(r.Stderr, "index is damaged") {
		t.Errorf("mount after the damage: %v; want exit 1, index is damaged", r)
	}
}
