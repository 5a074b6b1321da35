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
// one payload directory; --duplicate makes the second copy g000002.
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
	out = harness.Lines(harness.Run(t, "publish", "--duplicate", s.store, s.capture, "--class", s.class))
	if len(out) == 0 || out[len(out)-1] != "g000002" || strings.Contains(strings.Join(out, "\n"), "already published") {
		t.Errorf("publish --duplicate printed %q; want a new g000002", out)
	}
	s.fsckClean(t)
}
