//go:build linux

package crash

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/tests/harness"
)

// incomingDir is the incoming directory the incoming scenarios publish.
const incomingDir = "incoming/cap"

// incomingScenarios kill a daemon publishing incoming/cap (`echo publish
// > ctl`) at each fail point a publication of an incoming directory
// passes: the publish-* points it shares with the CLI, then
// incoming-committed. Whatever the point, after recovery either the
// generation is published, complete, and incoming/cap is empty, or it is
// not and incoming/cap still holds the whole capture: never half.
func incomingScenarios() []scenario {
	// fill makes incoming/cap and copies the sample capture and its class
	// into it through an unarmed mount; g000002 may come from it.
	fill := func(t *testing.T, f *fixture) {
		d := f.mount(t)
		harness.MustTool(t, "mkdir", f.path(incomingDir))
		args := []string{"--sparse=always"}
		for _, a := range incomingArtifacts {
			args = append(args, filepath.Join(f.sample, a))
		}
		args = append(args, f.class, f.path(incomingDir)+"/")
		harness.MustTool(t, "cp", args...)
		d.Stop()
		f.captures[g2] = f.sample
	}
	publish := func(t *testing.T, f *fixture, fp string) {
		f.throughMount(t, fp, f.expand(write("publish", "MNT/"+incomingDir+"/ctl"))...)
	}
	notPublished := func(t *testing.T, f *fixture, v *view) {
		wantGens(t, v, map[string]store.GenerationState{g1: store.Published})
		wantIncoming(t, f, append(slices.Clone(incomingArtifacts), "class.json", "ctl", "status"))
		for _, a := range incomingArtifacts {
			if r := harness.Tool(t, "cmp", filepath.Join(f.sample, a), f.path(incomingDir, a)); r.Code != 0 {
				t.Errorf("cmp %s of incoming/cap after the crash: %s%s", a, r.Stdout, r.Stderr)
			}
		}
	}
	published := func(t *testing.T, f *fixture, v *view) {
		wantGens(t, v, map[string]store.GenerationState{g1: store.Published, g2: store.Published})
		wantIncoming(t, f, []string{"ctl", "status"})
		harness.MustTool(t, "rmdir", f.path(incomingDir))
	}
	rows := []scenario{
		{name: "publish-reserved/incoming", check: notPublished},
		{name: "publish-renamed/incoming", before: []string{store.ProblemPayloadOrphaned}, check: notPublished},
		// Committed, the incoming names not yet removed: the payload has
		// two links (fsck: one artifact-links per artifact) until the
		// recovering Open removes the incoming ones.
		{name: "incoming-committed", before: []string{store.ProblemArtifactLinks, store.ProblemArtifactLinks, store.ProblemArtifactLinks}, check: published},
	}
	for _, a := range incomingArtifacts {
		rows = append(rows, scenario{name: copiedPrefix + a + "/incoming", before: []string{store.ProblemStagingLeftover}, check: notPublished})
	}
	for i := range rows {
		rows[i].via, rows[i].setup, rows[i].op = viaMount, fill, publish
	}
	return rows
}

// incomingArtifacts are the sample capture's files, in the order publish
// takes them.
var incomingArtifacts = []string{manifest.ManifestFileName, manifest.StateFileName, manifest.MemoryFileName}

// wantIncoming fails the test unless incoming/cap lists want.
func wantIncoming(t *testing.T, f *fixture, want []string) {
	t.Helper()
	slices.Sort(want)
	if got := harness.Lines(harness.MustTool(t, "ls", f.path(incomingDir))); !slices.Equal(got, want) {
		t.Errorf("ls %s after recovery = %q, want %q", incomingDir, got, want)
	}
	if _, err := os.Lstat(filepath.Join(f.store, store.IncomingDir, "cap")); err != nil {
		t.Errorf("store's incoming/cap: %v", err)
	}
}
