//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"templatefs/tests/harness"
)

// TestIncomingPublish publishes `templatefs sample-capture`'s capture
// through a real daemon with file tools only: mkdir incoming/cap1, cp
// --sparse=always the capture and class.json into it, echo publish > ctl,
// cat status, ls generations, cmp each payload, du shows the holes kept,
// fsck clean, rmdir. With -tags fuse3 it runs against both backends.
func TestIncomingPublish(t *testing.T) {
	harness.RequireFUSE(t)
	backends := [][]string{{"--backend", "go-fuse"}}
	if harness.Cgofuse {
		backends = append(backends, []string{"--backend", "cgofuse"})
	}
	for _, backend := range backends {
		t.Run(backend[1], func(t *testing.T) {
			s := newSession(t, "--memory", "256MiB")
			d := harness.StartMount(t, s.store, s.mnt, backend...)
			in := s.path("incoming", "cap1")
			harness.MustTool(t, "mkdir", in)
			args := []string{"--sparse=always"}
			for _, name := range s.captureFiles(t) {
				args = append(args, filepath.Join(s.capture, name))
			}
			harness.MustTool(t, "cp", append(args, s.class, in+"/")...)
			harness.MustTool(t, "sh", "-c", `echo publish > "$1"`, "sh", filepath.Join(in, "ctl"))
			if got := harness.MustTool(t, "cat", filepath.Join(in, "status")); got != "published g000001\n" {
				t.Fatalf("status %q, want published g000001", got)
			}
			if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations"))); !slices.Equal(got, []string{"g000001"}) {
				t.Errorf("ls generations = %q", got)
			}
			s.cmpPayload(t, s.path("generations", "g000001", "payload"))
			var st syscall.Stat_t
			if err := syscall.Stat(s.path("generations", "g000001", "payload", "memory.bin"), &st); err != nil {
				t.Fatal(err)
			}
			if st.Blocks*512 >= st.Size/8 {
				t.Errorf("published memory.bin: %d blocks for %d bytes, want its holes kept", st.Blocks, st.Size)
			}
			if du := harness.MustTool(t, "du", "-k", s.path("generations", "g000001", "payload", "memory.bin")); strings.HasPrefix(du, "262144") {
				t.Errorf("du of the published memory.bin: %s, want less than its size", du)
			}
			// A second publish is refused, already published (bash's echo
			// names the errno; dash's says "I/O error" for any), and
			// status keeps the generation.
			if r := harness.Tool(t, "bash", "-c", `echo publish > "$1"`, "bash", filepath.Join(in, "ctl")); r.Code == 0 || !strings.Contains(r.Stderr, "Invalid argument") {
				t.Errorf("second publish: %v, want EINVAL", r)
			}
			if got := harness.MustTool(t, "cat", filepath.Join(in, "status")); got != "published g000001\n" {
				t.Errorf("status after a second publish %q, want it to keep published g000001", got)
			}
			harness.MustTool(t, "rmdir", in)
			if entries, err := os.ReadDir(filepath.Join(s.store, "incoming")); err != nil || len(entries) != 0 {
				t.Errorf("store's incoming/ holds %v, %v after rmdir", entries, err)
			}
			d.Stop()
			s.fsckClean(t)
		})
	}
}
