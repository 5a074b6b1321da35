package leasefs

import (
	"errors"
	"testing"

	"templatefs/store"
)

// op runs one operation on the fixture, addressed by paths.
type op func(fx *fixture) error

func create(path string, excl bool) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		_, err := fx.fs.Create(dir, name, excl)
		return err
	}
}

func remove(path string) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		return fx.fs.Remove(dir, name)
	}
}

func rmdir(path string) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		return fx.fs.Rmdir(dir, name)
	}
}

func makeEntry(path string) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		return fx.fs.MakeEntry(dir, name)
	}
}

func rename(from, to string, flags RenameFlags) op {
	return func(fx *fixture) error {
		oldDir, oldName := fx.parent(from)
		newDir, newName := fx.parent(to)
		return fx.fs.Rename(oldDir, oldName, newDir, newName, flags, 77)
	}
}

func open(path string, fl OpenFlags) op {
	return func(fx *fixture) error {
		n, err := fx.fs.Walk(fx.expand(path))
		if err != nil {
			return err
		}
		h, err := fx.fs.Open(n, fl)
		if h.File != nil {
			h.File.Close()
		}
		return err
	}
}

func setattr(path string, c AttrChange) op {
	return func(fx *fixture) error { return fx.fs.SetAttr(fx.walk(path), c) }
}

func xattr(path string) op {
	return func(fx *fixture) error { return fx.fs.ChangeXattr(fx.walk(path), "user.x") }
}

func write(path string) op {
	return func(fx *fixture) error { return fx.fs.Write(fx.walk(path)) }
}

// TestOps runs every mutation against a fresh fixture (g1 published with
// lease c1, g2 tombstoned with lease c2, g3 published) and checks the
// errno, then the store state the row promises.
func TestOps(t *testing.T) {
	capture := makeCaptures(t)
	const pay = "generations/g000001/payload/memory.bin"
	tests := []struct {
		name  string
		op    op
		want  Errno
		check func(fx *fixture) error // optional, runs after a successful op
	}{
		{"create lease", create("generations/g000003/leases/new", false), OK, leaseOn("new", 3)},
		{"create lease excl", create("generations/g000003/leases/new", true), OK, leaseOn("new", 3)},
		{"create existing lease excl", create("generations/g000001/leases/c1", true), EEXIST, nil},
		{"create existing lease retry", create("generations/g000001/leases/c1", false), OK, leaseOn("c1", 1)},
		{"create lease on tombstoned", create("tombstones/g000002/leases/new", false), EPERM, noLease("new")},
		{"create lease on retiring", create("tombstones/g000005/leases/new", false), EPERM, noLease("new")},
		{"create lease on ineligible", create("generations/g000004/leases/new", false), EPERM, noLease("new")},
		{"create existing lease on tombstoned", create("tombstones/g000002/leases/c2", false), OK, leaseOn("c2", 2)},
		{"create existing lease on tombstoned excl", create("tombstones/g000002/leases/c2", true), EEXIST, nil},
		{"create conflicting lease", create("generations/g000003/leases/c1", false), EBUSY, leaseOn("c1", 1)},
		{"create conflicting lease on tombstoned", create("tombstones/g000002/leases/c1", false), EBUSY, nil},
		{"create invalid clone ID", create("generations/g000003/leases/.hidden", false), EINVAL, nil},
		{"create clone ID with space", create("generations/g000003/leases/a b", false), EINVAL, nil},
		{"create clone ID too long", create("generations/g000003/leases/"+string(make([]byte, 129)), false), EINVAL, nil},
		{"create in top leases", create("leases/new", false), EPERM, noLease("new")},
		{"create in root", create("new", false), EPERM, nil},
		{"create in generations", create("generations/g000009", false), EPERM, nil},
		{"create in generation dir", create("generations/g000001/new", false), EPERM, nil},
		{"create in payload", create("generations/g000001/payload/scratch.img", false), EPERM, nil},
		{"create in keys", create("keys/new", false), EPERM, nil},
		{"create existing status excl", create("generations/g000001/status", true), EEXIST, nil},
		{"create existing payload", create(pay, false), OK, nil},
		{"create below a file", create("store/x", false), ENOTDIR, nil},

		{"unlink lease in generation", remove("generations/g000001/leases/c1"), OK, noLease("c1")},
		{"unlink lease in top leases", remove("leases/c1"), OK, noLease("c1")},
		{"unlink lease of tombstoned", remove("tombstones/g000002/leases/c2"), OK, noLease("c2")},
		{"unlink last lease of retiring", remove("leases/c5"), OK, retired(5)},
		{"unlink missing lease", remove("leases/nobody"), ENOENT, nil},
		{"unlink lease of other generation", remove("generations/g000003/leases/c1"), ENOENT, leaseOn("c1", 1)},
		{"unlink payload", remove(pay), EPERM, nil},
		{"unlink status", remove("generations/g000001/status"), EPERM, nil},
		{"unlink store", remove("store"), EPERM, nil},
		{"unlink directory", remove("generations/g000001"), EISDIR, nil},

		{"rmdir generation", rmdir("generations/g000001"), EPERM, state(1, store.Published)},
		{"rmdir leases", rmdir("leases"), EPERM, nil},
		{"rmdir missing", rmdir("generations/g000009"), ENOENT, nil},
		{"rmdir file", rmdir("store"), ENOTDIR, nil},
		{"mkdir new", makeEntry("generations/g000001/leases/dir"), EPERM, nil},
		{"mkdir in root", makeEntry("new"), EPERM, nil},
		{"mkdir existing", makeEntry("generations"), EEXIST, nil},
		{"mkdir below a file", makeEntry("store/x"), ENOTDIR, nil},

		{"tombstone", rename("generations/g000001", "tombstones/g000001", 0), OK, tombstonedBy(1, 77)},
		{"tombstone noreplace", rename("generations/g000003", "tombstones/g000003", RenameNoReplace), OK, tombstonedBy(3, 77)},
		{"tombstone twice", rename("generations/g000002", "tombstones/g000002", 0), ENOENT, tombstonedBy(2, 1234)},
		{"tombstone ineligible", rename("generations/g000004", "tombstones/g000004", 0), OK, tombstonedBy(4, 77)},
		{"tombstone other name", rename("generations/g000001", "tombstones/g1", 0), EPERM, state(1, store.Published)},
		{"tombstone exchange", rename("generations/g000001", "tombstones/g000001", RenameExchange), EPERM, state(1, store.Published)},
		{"tombstone whiteout", rename("generations/g000001", "tombstones/g000001", RenameWhiteout), EPERM, state(1, store.Published)},
		{"lift", rename("tombstones/g000002", "generations/g000002", 0), EPERM, state(2, store.Tombstoned)},
		{"rename within generations", rename("generations/g000001", "generations/g000009", 0), EPERM, state(1, store.Published)},
		{"rename missing", rename("generations/g000009", "tombstones/g000009", 0), ENOENT, nil},
		{"rename lease", rename("leases/c1", "leases/c9", 0), EPERM, leaseOn("c1", 1)},
		{"rename payload", rename(pay, "generations/g000001/payload/x", 0), EPERM, nil},
		{"rename root entry", rename("store", "store2", 0), EPERM, nil},

		{"open payload", open(pay, OpenFlags{}), OK, nil},
		{"open payload for write", open(pay, OpenFlags{Write: true}), EROFS, nil},
		{"open payload truncating", open(pay, OpenFlags{Truncate: true}), EROFS, nil},
		{"open tombstoned payload", open("tombstones/g000002/payload/state.bin", OpenFlags{}), OK, nil},
		{"open status for write", open("generations/g000001/status", OpenFlags{Write: true}), EROFS, nil},
		{"open manifest for write", open("generations/g000001/manifest", OpenFlags{Write: true}), EROFS, nil},
		{"open store for write", open("store", OpenFlags{Write: true}), EROFS, nil},
		{"open key for write", open("keys/KEY/key", OpenFlags{Write: true}), EROFS, nil},
		{"open lease for write", open("leases/c1", OpenFlags{Write: true}), OK, nil},
		{"open lease truncating", open("leases/c1", OpenFlags{Write: true, Truncate: true}), EPERM, nil},
		{"open directory", open("generations", OpenFlags{}), EISDIR, nil},

		{"touch lease", setattr("leases/c1", ChangeTimes), OK, nil},
		{"touch leases dir", setattr("generations/g000001/leases", ChangeTimes), OK, nil},
		{"chmod lease", setattr("leases/c1", ChangeMode), EPERM, nil},
		{"chown lease", setattr("generations/g000001/leases/c1", ChangeOwner), EPERM, nil},
		{"truncate lease", setattr("leases/c1", ChangeSize), EPERM, nil},
		{"touch and truncate lease", setattr("leases/c1", ChangeTimes|ChangeSize), EPERM, nil},
		{"touch payload", setattr(pay, ChangeTimes), EROFS, nil},
		{"chmod payload", setattr(pay, ChangeMode), EROFS, nil},
		{"chown payload", setattr(pay, ChangeOwner), EROFS, nil},
		{"truncate payload", setattr(pay, ChangeSize), EROFS, nil},
		{"chmod status", setattr("generations/g000001/status", ChangeMode), EROFS, nil},
		{"chmod generations", setattr("generations", ChangeMode), EROFS, nil},
		{"empty setattr payload", setattr(pay, 0), OK, nil},
		{"setxattr payload", xattr(pay), EROFS, nil},
		{"setxattr generation", xattr("generations/g000001"), EROFS, nil},
		{"setxattr lease", xattr("leases/c1"), EPERM, nil},

		{"write lease", write("leases/c1"), EINVAL, nil},
		{"write payload", write(pay), EROFS, nil},
		{"write status", write("generations/g000001/status"), EROFS, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, capture)
			err := tt.op(fx)
			if got := ToErrno(err); got != tt.want {
				t.Fatalf("errno %v (%v), want %v", got, err, tt.want)
			}
			if tt.check != nil {
				if err := tt.check(fx); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func leaseOn(clone string, gen int) func(fx *fixture) error {
	return func(fx *fixture) error {
		l, err := fx.st.Lease(clone)
		if err != nil {
			return err
		}
		if l.Generation != fx.gens[gen].ID {
			return errors.New("lease " + clone + " is on " + l.Generation.String() + ", want " + fx.gens[gen].ID.String())
		}
		if _, err := fx.fs.Walk("leases/" + clone); err != nil {
			return err
		}
		return nil
	}
}

func noLease(clone string) func(fx *fixture) error {
	return func(fx *fixture) error {
		if _, err := fx.st.Lease(clone); !errors.Is(err, store.ErrNotFound) {
			return errors.New("lease " + clone + " still exists")
		}
		if _, err := fx.fs.Walk("leases/" + clone); ToErrno(err) != ENOENT {
			return errors.New("leases/" + clone + " still listed")
		}
		return nil
	}
}

func state(gen int, want store.GenerationState) func(fx *fixture) error {
	return func(fx *fixture) error {
		g, err := fx.st.Generation(fx.gens[gen].ID)
		if err != nil {
			return err
		}
		if g.State != want {
			return errors.New(g.ID.String() + " is " + string(g.State) + ", want " + string(want))
		}
		dir := "generations/"
		if want == store.Tombstoned {
			dir = "tombstones/"
		}
		_, err = fx.fs.Walk(dir + g.ID.String())
		return err
	}
}

// retired checks that generation gen is gone from the store and the tree.
func retired(gen int) func(fx *fixture) error {
	return func(fx *fixture) error {
		id := fx.gens[gen].ID
		if _, err := fx.st.Generation(id); !errors.Is(err, store.ErrNotFound) {
			return errors.New(id.String() + " still in the store")
		}
		if _, err := fx.fs.Walk("tombstones/" + id.String()); ToErrno(err) != ENOENT {
			return errors.New(id.String() + " still under tombstones/")
		}
		return nil
	}
}

func tombstonedBy(gen int, uid uint32) func(fx *fixture) error {
	return func(fx *fixture) error {
		if err := state(gen, store.Tombstoned)(fx); err != nil {
			return err
		}
		g, _ := fx.st.Generation(fx.gens[gen].ID)
		if g.Tombstone == nil || g.Tombstone.UID != uid {
			return errors.New(g.ID.String() + " tombstone record lacks uid")
		}
		if _, err := fx.fs.Walk("generations/" + g.ID.String()); ToErrno(err) != ENOENT {
			return errors.New(g.ID.String() + " still under generations/")
		}
		return nil
	}
}
