package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"templatefs/store"
	"templatefs/store/templatekey"
)

// TestPublishIfNew publishes one capture again: PublishIfNew returns the
// first generation, copies nothing and burns no ID; a tombstoned copy still
// counts, a retiring one does not. A capture with the same manifest but
// other memory bytes, and Publish (the explicit second copy), make new
// generations.
func TestPublishIfNew(t *testing.T) {
	dir, st, _ := openStore(t)
	class := templatekey.SampleClass()
	capture := makeCapture(t, 16<<20, 1)
	g1 := publish(t, st, capture)
	payloads := func() int {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(dir, store.PayloadDir))
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	ifNew := func(capture string) (store.Generation, bool) {
		t.Helper()
		g, published, err := st.PublishIfNew(capture, &class)
		if err != nil {
			t.Fatal(err)
		}
		return g, published
	}

	if g, published := ifNew(capture); published || g.ID != g1.ID {
		t.Errorf("PublishIfNew of the published capture: %s, published %v; want %s, not published", g.ID, published, g1.ID)
	}
	if n := payloads(); n != 1 {
		t.Errorf("%d payload directories after PublishIfNew of a published capture, want 1", n)
	}
	if _, err := st.Tombstone(g1.ID, 0); err != nil {
		t.Fatal(err)
	}
	if g, published := ifNew(capture); published || g.ID != g1.ID {
		t.Errorf("PublishIfNew of a capture identical to tombstoned %s: %s, published %v; want %s", g1.ID, g.ID, published, g1.ID)
	}

	// Same manifest (so the same key and manifest digest), other memory bytes.
	other := makeCapture(t, 16<<20, 1)
	f, err := os.OpenFile(filepath.Join(other, "memory.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("other"), 8192); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g2, published := ifNew(other)
	if !published || g2.ID != 2 || g2.KeyID != g1.KeyID {
		t.Errorf("PublishIfNew of a capture with other memory bytes: %s of key %s, published %v; want new g000002 of key %s", g2.ID, g2.KeyID, published, g1.KeyID)
	}
	g3 := publish(t, st, capture)
	if g3.ID != 3 {
		t.Errorf("Publish of an already published capture made %s, want g000003 (a second copy)", g3.ID)
	}

	// A retiring generation is on its way out: it is not offered.
	if _, _, err := st.AcquireLease(g3.ID, "held"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Tombstone(g3.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retire(g1.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retire(g3.ID, 0); err != nil {
		t.Fatal(err)
	}
	if g, published := ifNew(capture); !published || g.ID != 4 {
		t.Errorf("PublishIfNew with only a retiring copy left: %s, published %v; want new g000004", g.ID, published)
	}
}
