package store_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"templatefs/store"
	"templatefs/store/templatekey"
)

// fillIncoming makes incoming/<name> in st and copies capture (sparsely,
// with cp) and the sample class into it.
func fillIncoming(t *testing.T, st *store.Store, name, capture string, withClass bool) string {
	t.Helper()
	if err := st.MakeIncoming(name); err != nil {
		t.Fatal(err)
	}
	dir, err := st.IncomingPath(name)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(capture)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if out, err := exec.Command("cp", "--sparse=always", filepath.Join(capture, e.Name()), filepath.Join(dir, store.IncomingCaptureDir, e.Name())).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
	}
	if withClass {
		class, err := json.Marshal(templatekey.SampleClass())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, store.IncomingClassFile), class, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestPublishIncoming publishes an incoming directory: the generation has
// the digests a CLI publication of the same capture records, its payload
// files are the incoming files themselves (one link each, read-only), and
// the incoming directory is left empty for RemoveIncoming.
func TestPublishIncoming(t *testing.T) {
	dir, st := newStore(t)
	capture := makeCapture(t, 16<<20, 1)
	in := fillIncoming(t, st, "cap1", capture, true)
	g, err := st.PublishIncoming("cap1")
	if err != nil {
		t.Fatal(err)
	}
	want := publish(t, st, capture)
	if !slices.Equal(g.Artifacts, want.Artifacts) || g.KeyID != want.KeyID {
		t.Errorf("incoming publication %+v, CLI publication of the same capture %+v", g, want)
	}
	for _, a := range g.Artifacts {
		fi, err := os.Stat(filepath.Join(dir, store.PayloadDir, g.ID.String(), a.Name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o400 {
			t.Errorf("%s mode %v, want 0400", a.Name, fi.Mode())
		}
	}
	f, err := st.OpenPayload(g.ID, "memory.bin")
	if err != nil {
		t.Fatalf("open the published memory.bin: %v", err)
	}
	f.Close()
	if got := listDir(t, in); !slices.Equal(got, []string{store.IncomingCaptureDir}) {
		t.Errorf("incoming/cap1 holds %q after publication, want only capture/", got)
	}
	if got := listDir(t, filepath.Join(in, store.IncomingCaptureDir)); len(got) != 0 {
		t.Errorf("incoming/cap1/capture holds %q after publication", got)
	}
	if problems, err := st.Check(store.CheckOptions{Digests: true}); err != nil || len(problems) != 0 {
		t.Errorf("check after an incoming publication: %v, %v", problems, err)
	}
	if err := st.RemoveIncoming("cap1"); err != nil {
		t.Fatal(err)
	}
	if names, err := st.IncomingNames(); err != nil || len(names) != 0 {
		t.Errorf("IncomingNames after RemoveIncoming: %q, %v", names, err)
	}
}

// TestPublishIncomingRefusals: no class, a missing artifact and a bad
// name are refused with the store and the directory unchanged; a
// directory with files cannot be removed.
func TestPublishIncomingRefusals(t *testing.T) {
	dir, st := newStore(t)
	capture := makeCapture(t, 16<<20, 1)
	in := fillIncoming(t, st, "cap1", capture, false)
	if _, err := st.PublishIncoming("cap1"); !errors.Is(err, store.ErrCapture) {
		t.Errorf("publish without class.json: %v, want ErrCapture", err)
	}
	assertEmptyStore(t, dir, st)
	fillClass := fillIncoming(t, st, "cap2", capture, true)
	if err := os.Remove(filepath.Join(fillClass, store.IncomingCaptureDir, "state.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PublishIncoming("cap2"); !errors.Is(err, store.ErrCapture) {
		t.Errorf("publish with state.bin missing: %v, want ErrCapture", err)
	}
	assertEmptyStore(t, dir, st)
	if got := listDir(t, filepath.Join(in, store.IncomingCaptureDir)); len(got) != 3 {
		t.Errorf("refused incoming/cap1 holds %q", got)
	}
	for _, name := range []string{"", ".x", "a/b", "-x"} {
		if err := st.MakeIncoming(name); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("MakeIncoming(%q): %v, want ErrInvalidID", name, err)
		}
		if _, err := st.PublishIncoming(name); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("PublishIncoming(%q): %v, want ErrInvalidID", name, err)
		}
	}
	if err := st.MakeIncoming("cap1"); !errors.Is(err, store.ErrExists) {
		t.Errorf("MakeIncoming of an existing name: %v, want ErrExists", err)
	}
	if _, err := st.PublishIncoming("none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PublishIncoming of a missing directory: %v, want ErrNotFound", err)
	}
	if err := st.RemoveIncoming("cap1"); !errors.Is(err, store.ErrNotEmpty) {
		t.Errorf("RemoveIncoming of a directory with files: %v, want ErrNotEmpty", err)
	}
}

// TestIncomingPublishedNamesRepaired leaves what a crash after the commit
// of an incoming publication leaves (the incoming names still linked to
// the payload, and class.json): Check reports artifact-links naming the
// incoming file, Check with Repair removes it, and so does Open.
func TestIncomingPublishedNamesRepaired(t *testing.T) {
	dir, st := newStore(t)
	capture := makeCapture(t, 16<<20, 1)
	in := fillIncoming(t, st, "cap1", capture, true)
	class, err := os.ReadFile(filepath.Join(in, store.IncomingClassFile))
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.PublishIncoming("cap1")
	if err != nil {
		t.Fatal(err)
	}
	relink := func() {
		t.Helper()
		for _, a := range g.Artifacts {
			if err := os.Link(filepath.Join(dir, store.PayloadDir, g.ID.String(), a.Name), filepath.Join(in, store.IncomingCaptureDir, a.Name)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(in, store.IncomingClassFile), class, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	relink()
	problems, err := st.Check(store.CheckOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != len(g.Artifacts) {
		t.Errorf("check found %v, want one artifact-links per artifact", problems)
	}
	for _, p := range problems {
		if p.Kind != store.ProblemArtifactLinks || !p.Repaired {
			t.Errorf("problem %v, want artifact-links, repaired", p)
		}
	}
	if got := listDir(t, in); !slices.Equal(got, []string{store.IncomingCaptureDir}) {
		t.Errorf("incoming/cap1 holds %q after the repair", got)
	}
	if problems, err := st.Check(store.CheckOptions{}); err != nil || len(problems) != 0 {
		t.Errorf("check after the repair: %v, %v", problems, err)
	}

	relink()
	st.Close()
	st = reopen(t, dir, sampleHost())
	defer st.Close()
	if got := listDir(t, filepath.Join(in, store.IncomingCaptureDir)); len(got) != 0 {
		t.Errorf("incoming/cap1/capture holds %q after Open", got)
	}
	if problems, err := st.Check(store.CheckOptions{}); err != nil || len(problems) != 0 {
		t.Errorf("check after Open: %v, %v", problems, err)
	}
}

// TestPublishIncomingHardLinkRefused: an artifact with a second hard link
// is a refused capture (ErrCapture naming it and its link count), found
// before the publication ID is reserved, so the next publication gets the
// first ID; and Open leaves such a file in place (it is not a name a
// crashed publication left).
func TestPublishIncomingHardLinkRefused(t *testing.T) {
	dir, st := newStore(t)
	capture := makeCapture(t, 16<<20, 1)
	in := fillIncoming(t, st, "cap1", capture, true)
	state := filepath.Join(in, store.IncomingCaptureDir, "state.bin")
	other := filepath.Join(in, "state.bin.other")
	if err := os.Link(state, other); err != nil {
		t.Fatal(err)
	}
	_, err := st.PublishIncoming("cap1")
	if !errors.Is(err, store.ErrCapture) || !strings.Contains(err.Error(), "state.bin has 2 hard links") {
		t.Errorf("publish of a hard-linked state.bin: %v; want ErrCapture naming state.bin and its 2 links", err)
	}
	assertEmptyStore(t, dir, st)

	st.Close()
	st = reopen(t, dir, sampleHost())
	defer st.Close()
	if got := listDir(t, filepath.Join(in, store.IncomingCaptureDir)); len(got) != 3 {
		t.Errorf("incoming/cap1/capture holds %q after Open, want the 3 artifacts", got)
	}
	if _, err := os.Stat(filepath.Join(in, store.IncomingClassFile)); err != nil {
		t.Errorf("class.json after Open: %v", err)
	}

	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	g, err := st.PublishIncoming("cap1")
	if err != nil {
		t.Fatal(err)
	}
	if g.ID != 1 {
		t.Errorf("publication after the refusal got %s, want g000001: the refusal used up an ID", g.ID)
	}
}
