package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"templatefs/store"
)

// TestHardLinkedPayloadRefused links a payload file to a second name
// outside the store: OpenPayload refuses it, and fsck reports it as
// artifact-links (even without --digests), naming the file.
func TestHardLinkedPayloadRefused(t *testing.T) {
	dir, st := newStore(t)
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	payload := filepath.Join(dir, store.PayloadDir, g.ID.String(), "memory.bin")
	if err := os.Link(payload, filepath.Join(filepath.Dir(dir), "other-name")); err != nil {
		t.Fatal(err)
	}
	f, err := st.OpenPayload(g.ID, "memory.bin")
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, store.ErrUnsafePath) || !strings.Contains(err.Error(), payload+" has 2 hard links") {
		t.Errorf("OpenPayload of a hard-linked payload: %v; want ErrUnsafePath naming %s and its 2 links", err, payload)
	}
	if f, err := st.OpenPayload(g.ID, "state.bin"); err != nil {
		t.Errorf("OpenPayload of state.bin, one link: %v", err)
	} else {
		f.Close()
	}
	for _, digests := range []bool{false, true} {
		problems, err := st.Check(store.CheckOptions{Digests: digests})
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) != 1 || problems[0].Kind != store.ProblemArtifactLinks || !strings.Contains(problems[0].Detail, payload) {
			t.Errorf("Check (digests %v) of a hard-linked payload: %+v; want one %s naming %s", digests, problems, store.ProblemArtifactLinks, payload)
		}
	}
}

// TestPayloadDirectorySwappedForSymlink replaces payload/<gen> with a
// symbolic link to a copy of it after Open: OpenPayload does not follow
// it (ELOOP), although the link's target holds the same file.
func TestPayloadDirectorySwappedForSymlink(t *testing.T) {
	dir, st := newStore(t)
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	gen := filepath.Join(dir, store.PayloadDir, g.ID.String())
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Rename(gen, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, gen); err != nil {
		t.Fatal(err)
	}
	f, err := st.OpenPayload(g.ID, "memory.bin")
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, syscall.ELOOP) {
		t.Errorf("OpenPayload through a symlinked payload/%s: %v; want ELOOP", g.ID, err)
	}
}

// TestOpenChecksParentDirectories opens stores below directories that
// other users could write to.
func TestOpenChecksParentDirectories(t *testing.T) {
	// storeIn makes a store at parent/store, then applies spoil.
	storeIn := func(t *testing.T, parent string, spoil func()) string {
		t.Helper()
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(parent, "store")
		if err := store.Init(dir); err != nil {
			t.Fatal(err)
		}
		spoil()
		return dir
	}
	open := func(dir string) error {
		st, err := store.Open(dir, store.Options{Logger: quietLog})
		if err == nil {
			st.Close()
		}
		return err
	}
	chmod := func(t *testing.T, path string, mode os.FileMode) {
		t.Helper()
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("group-writable parent", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "shared")
		dir := storeIn(t, parent, func() { chmod(t, parent, 0o775) })
		err := open(dir)
		if !errors.Is(err, store.ErrUnsafePath) || !strings.Contains(err.Error(), parent+", above the store, has mode drwxrwxr-x") {
			t.Errorf("Open below a group-writable directory: %v; want ErrUnsafePath naming %s as drwxrwxr-x", err, parent)
		}
		if err := store.Init(filepath.Join(parent, "second")); !errors.Is(err, store.ErrUnsafePath) {
			t.Errorf("Init below a group-writable directory: %v; want ErrUnsafePath", err)
		}
	})
	t.Run("world-writable grandparent", func(t *testing.T) {
		top := filepath.Join(t.TempDir(), "top")
		dir := storeIn(t, filepath.Join(top, "mine"), func() { chmod(t, top, 0o777) })
		if err := open(dir); !errors.Is(err, store.ErrUnsafePath) || !strings.Contains(err.Error(), top+", above the store, has mode drwxrwxrwx") {
			t.Errorf("Open two levels below a world-writable directory: %v; want ErrUnsafePath naming %s", err, top)
		}
	})
	t.Run("sticky parent, own next component", func(t *testing.T) {
		sticky := filepath.Join(t.TempDir(), "tmp")
		dir := storeIn(t, filepath.Join(sticky, "mine"), func() { chmod(t, sticky, 0o777|os.ModeSticky) })
		if err := open(dir); err != nil {
			t.Errorf("Open below a sticky directory whose next component is ours: %v", err)
		}
	})
	t.Run("store made directly in a sticky directory", func(t *testing.T) {
		sticky := filepath.Join(t.TempDir(), "tmp") // as `templatefs init /tmp/store`
		if err := os.Mkdir(sticky, 0o755); err != nil {
			t.Fatal(err)
		}
		chmod(t, sticky, 0o777|os.ModeSticky)
		dir := filepath.Join(sticky, "store")
		if err := store.Init(dir); err != nil {
			t.Fatalf("Init of a new store in a sticky directory: %v", err)
		}
		if err := open(dir); err != nil {
			t.Errorf("Open of a store made in a sticky directory: %v", err)
		}
	})
	t.Run("symlinked parent", func(t *testing.T) {
		real := filepath.Join(t.TempDir(), "real")
		dir := storeIn(t, real, func() {})
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(filepath.Join(link, "store"), store.Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if st.Dir() != dir {
			t.Errorf("Dir() of a store opened through a symlinked parent: %s, want the resolved %s", st.Dir(), dir)
		}
	})
	if os.Geteuid() != 0 {
		t.Skip("the other-owner cases chown to uid 65534, which needs root")
	}
	t.Run("sticky parent, next component another user's", func(t *testing.T) {
		sticky := filepath.Join(t.TempDir(), "tmp")
		theirs := filepath.Join(sticky, "theirs")
		dir := storeIn(t, theirs, func() {
			chmod(t, sticky, 0o777|os.ModeSticky)
			if err := os.Chown(theirs, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		})
		err := open(dir)
		if !errors.Is(err, store.ErrUnsafePath) || !strings.Contains(err.Error(), sticky+", above the store, has mode drwxrwxrwt") || !strings.Contains(err.Error(), theirs+" is not owned by uid") {
			t.Errorf("Open below %s owned by uid 65534 in a sticky directory: %v; want ErrUnsafePath naming both", theirs, err)
		}
	})
	t.Run("parent owned by another user", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "theirs")
		dir := storeIn(t, parent, func() {
			if err := os.Chown(parent, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		})
		if err := open(dir); !errors.Is(err, store.ErrUnsafePath) || !strings.Contains(err.Error(), parent+", above the store, is owned by uid 65534") {
			t.Errorf("Open below a directory owned by uid 65534: %v; want ErrUnsafePath naming it", err)
		}
	})
}

// TestUnsafeModeShownAsDirectory: a group-writable store directory is
// named with its mode as ls shows a directory's.
func TestUnsafeModeShownAsDirectory(t *testing.T) {
	dir, st := newStore(t)
	st.Close()
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(dir, store.Options{Logger: quietLog})
	if !errors.Is(err, store.ErrUnsafePath) || !strings.Contains(err.Error(), dir+" has mode drwxrwx---,") {
		t.Errorf("Open of a group-writable store: %v; want ErrUnsafePath with mode drwxrwx---", err)
	}
}
