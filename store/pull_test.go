package store_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/store"
	"templatefs/store/templatekey"
)

// stagePulled stages generation g of src in dst as a pull does: class.json,
// then each artifact written into its .part file and saved.
func stagePulled(t *testing.T, src *store.Store, g store.Generation, dst *store.Store) *store.PullStage {
	t.Helper()
	class, err := json.Marshal(templatekey.SampleClass())
	if err != nil {
		t.Fatal(err)
	}
	stage, err := dst.StagePull(store.PullStageName(strings.Repeat("ab", 32)), class)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range g.Artifacts {
		in, err := src.OpenPayload(g.ID, a.Name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(in)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		if stage.Saved(a.Name) {
			t.Fatalf("%s saved before it was written", a.Name)
		}
		f, err := stage.Create(a.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(a.Size); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := stage.Save(f); err != nil {
			t.Fatal(err)
		}
		if !stage.Saved(a.Name) {
			t.Fatalf("%s not saved", a.Name)
		}
	}
	return stage
}

// TestPullStagePublish: a staged pull publishes as a generation with the
// source's key ID and artifacts, the staging directory goes, and Held
// finds the generation afterwards.
func TestPullStagePublish(t *testing.T) {
	_, src := newStore(t)
	g := publish(t, src, makeCapture(t, 1<<20, 1))
	dir, dst := newStore(t)
	if _, held, err := dst.Held(g.KeyID, g.Artifacts); err != nil || held {
		t.Fatalf("Held in an empty store: %v, %v", held, err)
	}
	got, err := stagePulled(t, src, g, dst).Publish(store.Expected{KeyID: g.KeyID, Artifacts: g.Artifacts}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.KeyID != g.KeyID || len(got.Artifacts) != len(g.Artifacts) {
		t.Fatalf("pulled generation %+v, source %+v", got, g)
	}
	for i := range g.Artifacts {
		if got.Artifacts[i] != g.Artifacts[i] {
			t.Errorf("artifact %d: %+v, source %+v", i, got.Artifacts[i], g.Artifacts[i])
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, store.IncomingDir)); len(entries) != 0 {
		t.Errorf("incoming/ keeps %v after the publication", entries)
	}
	held, found, err := dst.Held(g.KeyID, g.Artifacts)
	if err != nil || !found || held.ID != got.ID {
		t.Errorf("Held = %v, %v, %v; want %s", held.ID, found, err, got.ID)
	}
}

// TestPullStageRefusesDifferent: a staged capture that does not reproduce
// the expected key ID or an artifact's SHA-256 is refused with
// ErrExpectedDiffers, publishing nothing; Discard removes the staging.
func TestPullStageRefusesDifferent(t *testing.T) {
	_, src := newStore(t)
	g := publish(t, src, makeCapture(t, 1<<20, 2))
	dir, dst := newStore(t)
	stage := stagePulled(t, src, g, dst)
	other := append([]store.Artifact(nil), g.Artifacts...)
	other[2].SHA256 = strings.Repeat("0", 64)
	for name, want := range map[string]store.Expected{
		"key ID":  {KeyID: strings.Repeat("1", 64), Artifacts: g.Artifacts},
		"digest":  {KeyID: g.KeyID, Artifacts: other},
		"missing": {KeyID: g.KeyID, Artifacts: g.Artifacts[:2]},
	} {
		if _, err := stage.Publish(want, nil); !errors.Is(err, store.ErrExpectedDiffers) {
			t.Errorf("%s: err = %v, want ErrExpectedDiffers", name, err)
		}
	}
	if gens, err := dst.Generations(); err != nil || len(gens) != 0 {
		t.Errorf("generations after refused pulls: %v, %v", gens, err)
	}
	if err := stage.Discard(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, store.IncomingDir)); len(entries) != 0 {
		t.Errorf("incoming/ keeps %v after Discard", entries)
	}
}
