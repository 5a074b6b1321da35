package leasefs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/store"
)

// TestDamagedIndexWhileServing cuts index.db short under the open store,
// as a failing disk can: the next operation that reads the index fails
// with EIO, and MNT/store then shows only the read_only line with the
// reason, so the damage stays visible; later changes fail too.
func TestDamagedIndexWhileServing(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	generations, storeFile := fx.walk("generations"), fx.walk("store")
	leases := fx.walk("generations/" + fx.gens[3].ID.String() + "/leases")
	if err := os.Truncate(filepath.Join(fx.dir, store.IndexFile), 2*4096); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.fs.Lookup(generations, fx.gens[3].ID.String()); ToErrno(err) != EIO {
		t.Errorf("lookup in a damaged index: %v (%v), want EIO", err, ToErrno(err))
	}
	h, err := fx.fs.Open(storeFile, OpenFlags{}, owner)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	got := string(h.Data)
	if !strings.HasPrefix(got, "read_only: store is read-only since ") || !strings.Contains(got, "index is damaged") || strings.Count(got, "\n") != 1 {
		t.Errorf("store of a damaged index = %q, want one read_only line naming the damage", got)
	}
	err = createClosed(fx.fs, leases, "c9", false, owner)
	if e := ToErrno(err); e != EIO && e != EROFS {
		t.Errorf("create lease in a damaged index: %v (%v), want EIO or EROFS", err, e)
	}
}
