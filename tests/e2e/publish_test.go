//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/tests/harness"
)

// TestPublishTwice publishes the sample capture again: publish says it is
// already published as g000001, prints that ID last, and the store keeps
// one payload directory; after a tombstone it fails (exit 1, no ID on
// stdout: a script would take a generation that grants no lease) and says
// how to get a usable copy; --duplicate makes the second copy g000002.
func TestPublishTwice(t *testing.T) {
	s := newSession(t, "--memory", "16MiB")
	if gen := s.publish(t); gen != "g000001" {
		t.Fatalf("first publish made %s", gen)
	}
	out := harness.Lines(harness.Run(t, "publish", s.store, s.capture, "--class", s.class))
	if len(out) == 0 || out[0] != "capture already published as g000001" || out[len(out)-1] != "g000001" {
		t.Errorf("second publish printed %q; want \"capture already published as g000001\" first and g000001 last", out)
	}
	entries, err := os.ReadDir(filepath.Join(s.store, "payload"))
	if err != nil || len(entries) != 1 {
		t.Errorf("payload/ holds %v (%v) after publishing the same capture twice, want only g000001", entries, err)
	}
	// A tombstoned copy still counts; the message says so.
	d := harness.StartMount(t, s.store, s.mnt)
	harness.MustTool(t, "mv", s.path("generations", "g000001"), s.path("tombstones")+"/")
	d.Stop()
	r := harness.RunStatus(t, "publish", s.store, s.capture, "--class", s.class)
	if r.Code != 1 || r.Stdout != "" || !strings.Contains(r.Stderr, "capture already published as g000001, which is tombstoned") || !strings.Contains(r.Stderr, "--duplicate") {
		t.Errorf("publish of a capture identical to tombstoned g000001: %v; want exit 1, nothing on stdout, and a message naming g000001, its state and --duplicate", r)
	}
	out = harness.Lines(harness.Run(t, "publish", "--duplicate", s.store, s.capture, "--class", s.class))
	if len(out) == 0 || out[len(out)-1] != "g000002" || strings.Contains(strings.Join(out, "\n"), "already published") {
		t.Errorf("publish --duplicate printed %q; want a new g000002", out)
	}
	s.fsckClean(t)
}

// TestHardLinkedPayloadThroughMount gives a published memory.bin a second
// name outside the store: reading it through the mount fails with EIO and
// the daemon logs the file and its link count; fsck reports artifact-links
// and exits 1.
func TestHardLinkedPayloadThroughMount(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t, "--memory", "16MiB")
	gen := s.publish(t)
	payload := filepath.Join(s.store, "payload", gen, "memory.bin")
	if err := os.Link(payload, filepath.Join(s.dir, "second-name")); err != nil {
		t.Fatal(err)
	}
	r := harness.RunStatus(t, "fsck", s.store)
	if r.Code != 1 || !strings.Contains(r.Stdout, "artifact-links generation "+gen+": "+payload+" has 2 hard links") {
		t.Errorf("fsck of a store with a hard-linked payload: %v; want exit 1 and artifact-links naming %s", r, payload)
	}
	d := harness.StartMount(t, s.store, s.mnt)
	r = harness.Tool(t, "cat", s.path("generations", gen, "payload", "memory.bin"))
	if r.Code == 0 || !strings.Contains(r.Stderr, "Input/output error") {
		t.Errorf("cat of a hard-linked payload through the mount: %v; want EIO", r)
	}
	if !strings.Contains(d.Log(), "has 2 hard links") {
		t.Errorf("daemon log does not name the hard-linked payload:\n%s", d.Log())
	}
	harness.MustTool(t, "cat", s.path("generations", gen, "payload", "state.bin"))
}
