package leasefs

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"templatefs/store"
)

// readSnapshot opens store.db and returns the snapshot's bytes.
func readSnapshot(t *testing.T, fx *fixture) []byte {
	t.Helper()
	h, err := fx.fs.Open(fx.walk(IndexFileName), OpenFlags{}, owner)
	if err != nil {
		t.Fatal(err)
	}
	if h.Snapshot == nil || h.Data != nil || h.File != nil {
		t.Fatalf("store.db handle %+v, want a snapshot file only", h)
	}
	defer h.Snapshot.Close()
	data, err := io.ReadAll(h.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestIndexFile: store.db's size is a snapshot's, its times are the index
// file's mtime (unchanged by reads and daemon restarts, moved by a
// commit), and a snapshot restores into a store with the same records.
func TestIndexFile(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	n := fx.walk(IndexFileName)
	before, err := fx.fs.Attr(n)
	if err != nil {
		t.Fatal(err)
	}
	snap := readSnapshot(t, fx)
	if int64(len(snap)) != before.Size || before.Mode != modeText || before.Ino != InoIndex {
		t.Errorf("snapshot %d bytes; attr size %d mode %v ino %d", len(snap), before.Size, before.Mode, before.Ino)
	}
	if len(snap) < 20 || binary.LittleEndian.Uint32(snap[16:20]) != 0xed0cdaed {
		t.Errorf("snapshot does not start with a bbolt meta page (magic 0xed0cdaed after the 16-byte page header)")
	}

	fx.reopen()
	again, err := fx.fs.Attr(fx.walk(IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Mtime.Equal(before.Mtime) || !again.Ctime.Equal(before.Ctime) || again.Size != before.Size {
		t.Errorf("after reopen mtime %v size %d, want %v %d", again.Mtime, again.Size, before.Mtime, before.Size)
	}

	time.Sleep(10 * time.Millisecond) // let the index file's mtime tick
	fx.acquire(3, "c9")
	after, err := fx.fs.Attr(n)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Mtime.After(before.Mtime) {
		t.Errorf("mtime %v after a commit, want after %v", after.Mtime, before.Mtime)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	index := filepath.Join(t.TempDir(), IndexFileName)
	if err := os.WriteFile(index, readSnapshot(t, fx), 0o600); err != nil {
		t.Fatal(err)
	}
	err = store.Restore(dir, index, func(g store.Generation, a store.Artifact) (*os.File, error) {
		return fx.st.OpenPayload(g.ID, a.Name)
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{Logger: quiet, NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if l, err := st.Lease("c9"); err != nil || l.Generation != fx.gens[3].ID {
		t.Errorf("restored lease c9: %+v, %v; want on %s", l, err, fx.gens[3].ID)
	}

	// The restored store is a new store that remembers its source.
	source, err := fx.st.Info()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := New(st, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n, err = restored.Walk("store")
	if err != nil {
		t.Fatal(err)
	}
	h, err := restored.Open(n, OpenFlags{}, owner)
	if err != nil {
		t.Fatal(err)
	}
	text := string(h.Data)
	if strings.Contains(text, "store_id: "+source.StoreID+"\n") || !strings.Contains(text, "restored_from: "+source.StoreID+"\n") {
		t.Errorf("restored store's store file, source %s:\n%s\nwant a new store_id and restored_from: %s", source.StoreID, text, source.StoreID)
	}
}

// TestSums: a generation's SHA256SUMS lists the digest recorded at
// publication of each of its artifacts, sorted, with names relative to
// the generation directory.
func TestSums(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	g := fx.gens[2]
	var want strings.Builder
	names := []string{}
	for _, a := range g.Artifacts {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	for _, name := range names {
		a, _ := g.Artifact(name)
		if len(a.SHA256) != 64 {
			t.Errorf("%s digest %q, want 64 hex digits", name, a.SHA256)
		}
		fmt.Fprintf(&want, "%s  payload/%s\n", a.SHA256, name)
	}
	n := fx.walk("tombstones/g000002/" + SumsFileName)
	h, err := fx.fs.Open(n, OpenFlags{}, owner)
	if err != nil {
		t.Fatal(err)
	}
	if string(h.Data) != want.String() {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", h.Data, want.String())
	}
	a, err := fx.fs.Attr(n)
	if err != nil || a.Size != int64(want.Len()) || !a.Mtime.Equal(g.PublishedAt) || !n.Immutable() {
		t.Errorf("attr %+v, %v; want size %d, mtime %v, immutable", a, err, want.Len(), g.PublishedAt)
	}
	if _, err := fx.fs.Open(n, OpenFlags{Write: true}, owner); ToErrno(err) != EROFS {
		t.Errorf("write-open of SHA256SUMS: %v, want EROFS", err)
	}
}

// TestBackupPath: each state's generations are found under its directory.
func TestBackupPath(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for i, want := range map[int]string{1: "generations/g000001/payload/state.bin", 2: "tombstones/g000002/payload/state.bin", 5: "retiring/g000005/payload/state.bin"} {
		t.Run(want, func(t *testing.T) {
			got, err := BackupPath(fx.gens[i], "state.bin")
			if err != nil || got != want {
				t.Errorf("BackupPath = %q, %v; want %q", got, err, want)
			}
			fx.walk(got) // the path exists in the tree
		})
	}
}
