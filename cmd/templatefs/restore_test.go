//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/tests/harness"
)

// TestRestoreNeedsStoreDB: a BACKUP_DIR without store.db (a copy of the
// wrong directory, say generations/) fails with exit 1, naming the
// directory and saying which one restore wants, and makes no store.
func TestRestoreNeedsStoreDB(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "generations")
	if err := os.Mkdir(backup, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	r := harness.Exec(t, harness.Command(t, "restore", backup, dir))
	want := backup + " has no store.db: BACKUP_DIR is the backup's copy of the mount's top directory"
	if r.Code != 1 || !strings.Contains(r.Stderr, want) {
		t.Errorf("restore from a directory without store.db: %v; want exit 1 and %q", r, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("restore that failed left %s: %v", dir, err)
	}
}
