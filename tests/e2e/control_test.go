//go:build linux

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"templatefs/tests/harness"
)

// TestCommandsWhileMounted runs publish, settings, fsck and verify on a
// mounted store while a clone holds a lease and has its memory.bin open:
// each works through the daemon, a generation published is in
// `ls MNT/generations` as soon as publish returns, new settings show in
// `cat MNT/store` at once, and the clone keeps reading its bytes.
func TestCommandsWhileMounted(t *testing.T) {
	harness.RequireFUSE(t)
	for _, backend := range []string{"go-fuse", "cgofuse"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "cgofuse" && !hasCgofuse(t) {
				t.Skip("the templatefs binary the harness built has no cgofuse backend (not built with -tags fuse3)")
			}
			commandsWhileMounted(t, backend)
		})
	}
}

// hasCgofuse reports whether the harness's binary was built with the
// fuse3 tag, as `go version -m` shows its build settings.
func hasCgofuse(t *testing.T) bool {
	out, err := exec.Command("go", "version", "-m", harness.Binary(t)).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if tags, ok := strings.CutPrefix(strings.TrimSpace(line), "build\t-tags="); ok {
			return slices.Contains(strings.Split(tags, ","), "fuse3")
		}
	}
	return false
}

func commandsWhileMounted(t *testing.T, backend string) {
	s := newSession(t, "--memory", "16MiB")
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt, "--backend", backend)
	harness.MustTool(t, "touch", s.path("generations", gen, "leases", "clone-1"))
	clone, err := os.Open(s.path("generations", gen, "payload", "memory.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()

	out := harness.Lines(harness.Run(t, "publish", "--duplicate", s.store, s.capture, "--class", s.class))
	if len(out) == 0 || out[len(out)-1] != "g000002" {
		t.Fatalf("publish --duplicate while mounted printed %q; want g000002 last", out)
	}
	if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations"))); !slices.Equal(got, []string{gen, "g000002"}) {
		t.Errorf("ls generations right after publish: %q; want [%s g000002]", got, gen)
	}
	if got := harness.Run(t, "settings", "--restore-window", "3d", s.store); !strings.HasPrefix(got, "restore_window: 72h0m0s\n") {
		t.Errorf("settings --restore-window 3d while mounted printed %q", got)
	}
	if got := harness.MustTool(t, "cat", s.path("store")); !strings.Contains(got, "\nrestore_window: 72h0m0s\n") {
		t.Errorf("cat store right after settings:\n%s\nwant restore_window: 72h0m0s", got)
	}
	for _, args := range [][]string{{"fsck", "--digests", s.store}, {"verify", s.store}, {"settings", s.store}} {
		if r := harness.RunStatus(t, args...); r.Code != 0 || strings.Contains(r.Stderr, "in use") {
			t.Errorf("templatefs %q while mounted: %v", args, r)
		}
	}
	if log := d.Log(); strings.Count(log, "control: operation done") != 5 {
		t.Errorf("the daemon did not run the 5 operations:\n%s", log)
	}

	want, err := os.ReadFile(filepath.Join(s.capture, "memory.bin"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if n, err := clone.ReadAt(got, 0); n != len(want) || !bytes.Equal(got, want) {
		t.Errorf("the clone's memory.bin after the commands: %d bytes (%v), equal %t", n, err, bytes.Equal(got, want))
	}
	clone.Close()
	d.Stop()
	s.fsckClean(t)
}
