package leasefs

import (
	"fmt"
	"os"
	"path/filepath"

	"templatefs/store"
)

// IndexFileName is the root file holding a snapshot of the store's bbolt
// index (project issue 5): each open takes one read transaction and serves
// a consistent copy of it (store.SnapshotIndex), so a backup of the mount
// is a consistent backup of the metadata too, and `templatefs restore`
// rebuilds a store from it and the payload tree.
const IndexFileName = "store.db"

// indexAttr fills the attributes of store.db. Its size is the size a
// snapshot taken now would have (store.IndexSize); a commit between a stat
// and an open can change it, so the file is read with direct I/O and a
// reader gets the whole snapshot of its open. Its mtime and ctime are the
// index file's mtime (it changes with every commit and only then), so
// backup tools see an unchanged store.db as unmodified across daemon
// restarts, and a changed one as modified.
func (f *FS) indexAttr(_ Node, a Attr) (Attr, error) {
	size, err := f.st.IndexSize()
	if err != nil {
		return Attr{}, err
	}
	fi, err := os.Stat(filepath.Join(f.st.Dir(), store.IndexFile))
	if err != nil {
		return Attr{}, fmt.Errorf("stat index of %s: %w", IndexFileName, err)
	}
	a.Size = size
	a.Blocks = (size + 511) / 512
	a.setTimes(fi.ModTime(), fi.ModTime())
	return a, nil
}

// BackupPath is where a backup of the mount holds artifact of generation
// g: "<state dir>/<gen>/payload/<artifact>", the directory of g's state
// (generations, tombstones or retiring). Errors: store.ErrNotFound
// (wrapped) for a state that has no directory in the tree.
func BackupPath(g store.Generation, artifact string) (string, error) {
	dir, ok := stateDir[g.State]
	if !ok {
		return "", fmt.Errorf("generation %s state %q has no directory in the tree: %w", g.ID, g.State, store.ErrNotFound)
	}
	return filepath.Join(dir.facts().entry, g.ID.String(), KindPayloadDir.facts().entry, artifact), nil
}
