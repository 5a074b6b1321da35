package leasefs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"templatefs/store"
)

// op runs one operation on the fixture, addressed by paths, as fx.caller.
type op func(fx *fixture) error

func create(path string, excl bool) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		return createClosed(fx.fs, dir, name, excl, fx.caller)
	}
}

func remove(path string) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		return fx.fs.Remove(dir, name, fx.caller)
	}
}

func rmdir(path string) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		return fx.fs.Rmdir(dir, name, fx.caller)
	}
}

func makeEntry(path string) op {
	return func(fx *fixture) error {
		dir, name := fx.parent(path)
		return fx.fs.MakeEntry(dir, name, fx.caller)
	}
}

func rename(from, to string, flags RenameFlags) op {
	return func(fx *fixture) error {
		oldDir, oldName := fx.parent(from)
		newDir, newName := fx.parent(to)
		return fx.fs.Rename(oldDir, oldName, newDir, newName, flags, fx.caller)
	}
}

func open(path string, fl OpenFlags) op {
	return func(fx *fixture) error {
		n, err := fx.fs.Walk(fx.expand(path))
		if err != nil {
			return err
		}
		h, err := fx.fs.Open(n, fl, fx.caller)
		if h.File != nil {
			h.File.Close()
		}
		return err
	}
}

func setattr(path string, c AttrChange) op {
	return func(fx *fixture) error { return fx.fs.SetAttr(fx.walk(path), c, fx.caller) }
}

func xattr(path string) op {
	return func(fx *fixture) error { return fx.fs.ChangeXattr(fx.walk(path), "user.x", fx.caller) }
}

// write opens path for writing, writes data in one call and closes it
// (Flush), as `printf ... > path` does; it returns the first error and
// checks that a successful write reports every byte written.
func write(path, data string) op {
	return func(fx *fixture) error {
		h, err := fx.fs.Open(fx.walk(path), OpenFlags{Write: true, Truncate: true}, fx.caller)
		if err != nil {
			return err
		}
		return writeAndClose(h, data, fx.caller)
	}
}

// writeAndClose writes data to h's command stream in one call as c, then
// flushes it as a close would.
func writeAndClose(h Handle, data string, c Caller) error {
	n, err := h.Commands.Write([]byte(data), c)
	if err == nil && n != len(data) {
		return fmt.Errorf("Write = %d, want %d", n, len(data))
	}
	if ferr := h.Commands.Flush(); err == nil {
		err = ferr
	}
	return err
}

// writeStale opens path for writing, cancels its (reserved) lease, runs then, and
// writes data through the handle opened before the release: an open
// file handle outliving its lease.
func writeStale(path, data string, then ...op) op {
	return func(fx *fixture) error {
		n := fx.walk(path)
		h, err := fx.fs.Open(n, OpenFlags{Write: true}, fx.caller)
		if err != nil {
			fx.t.Fatal(err)
		}
		if err := fx.st.CancelLease(n.name); err != nil {
			fx.t.Fatal(err)
		}
		for _, o := range then {
			if err := o(fx); err != nil {
				fx.t.Fatal(err)
			}
		}
		return writeAndClose(h, data, fx.caller)
	}
}

func allocate(path string) op {
	return func(fx *fixture) error { return fx.fs.Allocate(fx.walk(path), fx.caller) }
}

// writeBy opens path for writing as the owner and writes data through
// that handle as c: a descriptor passed to another user.
func writeBy(c Caller, path, data string) op {
	return func(fx *fixture) error {
		h, err := fx.fs.Open(fx.walk(path), OpenFlags{Write: true}, owner)
		if err != nil {
			fx.t.Fatal(err)
		}
		return writeAndClose(h, data, c)
	}
}

// as runs o as caller c.
func as(c Caller, o op) op {
	return func(fx *fixture) error {
		fx.caller = c
		defer func() { fx.caller = owner }()
		return o(fx)
	}
}

// seq runs setup as the owner, failing the test on error, then o.
func seq(o op, setup ...op) op {
	return func(fx *fixture) error {
		for _, s := range setup {
			if err := s(fx); err != nil {
				fx.t.Fatalf("setup: %v", err)
			}
		}
		return o(fx)
	}
}

// TestOps runs every mutation against a fresh fixture (g1 published with
// lease c1, g2 tombstoned with lease c2, g3 published, g4 ineligible, g5
// retiring with lease c5) and checks the errno, then the store state the
// row promises.
func TestOps(t *testing.T) {
	capture := makeCaptures(t)
	const pay = "generations/g000001/payload/memory.bin"
	const noProcess = "pid 2147483647" // above Linux's pid_max: no process has it
	tests := []struct {
		name  string
		op    op
		want  Errno
		check func(fx *fixture) error // optional, runs after the op
	}{
		{"create lease", create("generations/g000003/leases/new", false), OK, leaseOn("new", 3)},
		{"create lease excl", create("generations/g000003/leases/new", true), OK, leaseOn("new", 3)},
		{"create existing lease excl", create("generations/g000001/leases/c1", true), EEXIST, nil},
		{"create existing lease retry", create("generations/g000001/leases/c1", false), OK, leaseOn("c1", 1)},
		{"create lease on tombstoned", create("tombstones/g000002/leases/new", false), EPERM, all(noLease("new"), refused(2, "create new EPERM: "))},
		{"create lease on retiring", create("retiring/g000005/leases/new", false), EPERM, all(noLease("new"), refused(5, "generation is retiring"))},
		{"create lease on ineligible", create("generations/g000004/leases/new", false), EPERM, all(noLease("new"), refused(4, "restore window"))},
		{"create existing lease on tombstoned", create("tombstones/g000002/leases/c2", false), OK, leaseOn("c2", 2)},
		{"create existing lease on tombstoned excl", create("tombstones/g000002/leases/c2", true), EEXIST, nil},
		{"create conflicting lease", create("generations/g000003/leases/c1", false), EBUSY, all(leaseOn("c1", 1), refused(3, "create c1 EBUSY"))},
		{"create conflicting lease on tombstoned", create("tombstones/g000002/leases/c1", false), EBUSY, nil},
		{"create invalid clone ID", create("generations/g000003/leases/.hidden", false), EINVAL, nil},
		{"create clone ID with space", create("generations/g000003/leases/a b", false), EINVAL, nil},
		{"create clone ID too long", create("generations/g000003/leases/"+string(make([]byte, 129)), false), EINVAL, nil},
		{"create in top leases", create("leases/new", false), EPERM, noLease("new")},
		{"create in root", create("new", false), EPERM, nil},
		{"create in generations", create("generations/g000009", false), EPERM, nil},
		{"create in retiring", create("retiring/g000009", false), EPERM, nil},
		{"create in generation dir", create("generations/g000001/new", false), EPERM, nil},
		{"create in payload", create("generations/g000001/payload/scratch.img", false), EPERM, nil},
		{"create in keys", create("keys/new", false), EPERM, nil},
		{"create in key dir", create("keys/KEY/new", false), EPERM, nil},
		{"create existing status excl", create("generations/g000001/status", true), EEXIST, nil},
		{"create existing ctl excl", create("generations/g000001/ctl", true), EEXIST, nil},
		{"create existing payload", create(pay, false), OK, nil},
		{"create below a file", create("store/x", false), ENOTDIR, nil},
		{"create lease as other", as(other, create("generations/g000003/leases/new", false)), EACCES, all(noLease("new"), refused(3, "create new EACCES"))},
		{"create existing lease as other", as(other, create("generations/g000001/leases/c1", false)), EACCES, leaseOn("c1", 1)},

		{"create key lease", create("keys/KEY/leases/new", false), OK, leaseOn("new", 3)},
		{"create key lease excl", create("keys/KEY/leases/new", true), OK, leaseOn("new", 3)},
		{"create key lease skips tombstoned", seq(create("keys/KEY/leases/new", false), rename("generations/g000003", "tombstones/g000003", 0)), OK, leaseOn("new", 1)},
		{"create key lease none eligible", seq(create("keys/KEY/leases/new", false),
			rename("generations/g000001", "tombstones/g000001", 0), rename("generations/g000003", "tombstones/g000003", 0)), EPERM, noLease("new")},
		{"create key lease existing", create("keys/KEY/leases/c2", false), OK, leaseOn("c2", 2)},
		{"create key lease existing excl", create("keys/KEY/leases/c1", true), EEXIST, leaseOn("c1", 1)},
		{"create key lease invalid clone ID", create("keys/KEY/leases/-x", false), EINVAL, nil},
		{"create key lease as other", as(other, create("keys/KEY/leases/new", false)), EACCES, noLease("new")},

		{"unlink reserved lease in generation", remove("generations/g000001/leases/c1"), EBUSY, all(leaseState("c1", store.Reserved), refused(1, "unlink c1 EBUSY"))},
		{"unlink reserved lease in top leases", remove("leases/c1"), EBUSY, leaseState("c1", store.Reserved)},
		{"unlink reserved lease in key leases", remove("keys/KEY/leases/c1"), EBUSY, leaseState("c1", store.Reserved)},
		{"unlink reserved lease of tombstoned", remove("tombstones/g000002/leases/c2"), EBUSY, leaseState("c2", store.Reserved)},
		{"unlink reserved last lease of retiring", remove("retiring/g000005/leases/c5"), EBUSY, all(leaseState("c5", store.Reserved), state(5, store.Retiring))},
		{"unlink missing lease", remove("leases/nobody"), ENOENT, nil},
		{"unlink lease of other generation", remove("generations/g000003/leases/c1"), ENOENT, leaseOn("c1", 1)},
		{"unlink payload", remove(pay), EPERM, nil},
		{"unlink status", remove("generations/g000001/status"), EPERM, nil},
		{"unlink ctl", remove("generations/g000001/ctl"), EPERM, nil},
		{"unlink store", remove("store"), EPERM, nil},
		{"unlink directory", remove("generations/g000001"), EISDIR, nil},
		{"unlink lease as other", as(other, remove("leases/c1")), EACCES, all(leaseOn("c1", 1), refused(1, "unlink c1 EACCES"))},

		{"rmdir tombstoned", rmdir("tombstones/g000002"), OK, all(retiringNow(2), leaseOn("c2", 2))},
		{"rmdir tombstoned without leases", seq(rmdir("tombstones/g000002"), write("leases/c2", "cancel")), OK, retired(2)},
		{"rmdir published", rmdir("generations/g000001"), EPERM, all(state(1, store.Published), refused(1, "rmdir g000001 EPERM: "), refused(1, "not tombstoned"))},
		{"rmdir retiring", rmdir("retiring/g000005"), EBUSY, all(retiringNow(5), refused(5, "rmdir g000005 EBUSY"))},
		{"rmdir tombstoned as other", as(other, rmdir("tombstones/g000002")), EACCES, all(state(2, store.Tombstoned), refused(2, "rmdir g000002 EACCES"))},
		{"rmdir leases", rmdir("leases"), EPERM, nil},
		{"rmdir retiring dir", rmdir("retiring"), EPERM, nil},
		{"rmdir generation leases", rmdir("tombstones/g000002/leases"), EPERM, state(2, store.Tombstoned)},
		{"rmdir payload", rmdir("tombstones/g000002/payload"), EPERM, state(2, store.Tombstoned)},
		{"rmdir missing", rmdir("tombstones/g000009"), ENOENT, nil},
		{"rmdir file", rmdir("store"), ENOTDIR, nil},
		{"mkdir new", makeEntry("generations/g000001/leases/dir"), EPERM, nil},
		{"mkdir in root", makeEntry("new"), EPERM, nil},
		{"mkdir existing", makeEntry("generations"), EEXIST, nil},
		{"mkdir below a file", makeEntry("store/x"), ENOTDIR, nil},
		{"mkdir as other", as(other, makeEntry("new")), EACCES, nil},

		{"tombstone", rename("generations/g000001", "tombstones/g000001", 0), OK, tombstonedBy(1, owner.UID)},
		{"tombstone by root", as(Caller{UID: 0}, rename("generations/g000001", "tombstones/g000001", 0)), OK, tombstonedBy(1, 0)},
		{"tombstone noreplace", rename("generations/g000003", "tombstones/g000003", RenameNoReplace), OK, tombstonedBy(3, owner.UID)},
		{"tombstone twice", rename("generations/g000002", "tombstones/g000002", 0), ENOENT, tombstonedBy(2, 1234)},
		{"tombstone ineligible", rename("generations/g000004", "tombstones/g000004", 0), OK, tombstonedBy(4, owner.UID)},
		{"tombstone other name", rename("generations/g000001", "tombstones/g1", 0), EPERM, all(state(1, store.Published), refused(1, "rename g000001 EPERM"))},
		{"tombstone exchange", rename("generations/g000001", "tombstones/g000001", RenameExchange), EPERM, state(1, store.Published)},
		{"tombstone whiteout", rename("generations/g000001", "tombstones/g000001", RenameWhiteout), EPERM, state(1, store.Published)},
		{"tombstone into retiring", rename("generations/g000001", "retiring/g000001", 0), EPERM, state(1, store.Published)},
		{"tombstone as other", as(other, rename("generations/g000001", "tombstones/g000001", 0)), EACCES, all(state(1, store.Published), refused(1, "rename g000001 EACCES"))},
		{"lift", rename("tombstones/g000002", "generations/g000002", 0), OK, all(state(2, store.Published), leaseOn("c2", 2))},
		{"lift noreplace", rename("tombstones/g000002", "generations/g000002", RenameNoReplace), OK, state(2, store.Published)},
		{"lift then lease", seq(create("generations/g000002/leases/new", false), rename("tombstones/g000002", "generations/g000002", 0)), OK, leaseOn("new", 2)},
		{"lift retiring", rename("retiring/g000005", "generations/g000005", 0), EPERM, all(retiringNow(5), refused(5, "generation is retiring"))},
		{"lift as other", as(other, rename("tombstones/g000002", "generations/g000002", 0)), EACCES, state(2, store.Tombstoned)},
		{"retire by rename", rename("tombstones/g000002", "retiring/g000002", 0), EPERM, state(2, store.Tombstoned)},
		{"lift other name", rename("tombstones/g000002", "generations/g2", 0), EPERM, state(2, store.Tombstoned)},
		{"rename within generations", rename("generations/g000001", "generations/g000009", 0), EPERM, state(1, store.Published)},
		{"rename missing", rename("generations/g000009", "tombstones/g000009", 0), ENOENT, nil},
		{"rename lease", rename("leases/c1", "leases/c9", 0), EPERM, leaseOn("c1", 1)},
		{"rename payload", rename(pay, "generations/g000001/payload/x", 0), EPERM, nil},
		{"rename root entry", rename("store", "store2", 0), EPERM, nil},
		{"rename state dir", rename("tombstones", "generations", 0), EPERM, nil},

		{"open payload", open(pay, OpenFlags{}), OK, nil},
		{"open payload as other", as(other, open(pay, OpenFlags{})), OK, nil},
		{"open status as other", as(other, open("retiring/g000005/status", OpenFlags{})), OK, nil},
		{"open payload for write", open(pay, OpenFlags{Write: true}), EROFS, nil},
		{"open payload truncating", open(pay, OpenFlags{Truncate: true}), EROFS, nil},
		{"open payload for write as other", as(other, open(pay, OpenFlags{Write: true})), EACCES, nil},
		{"open tombstoned payload", open("tombstones/g000002/payload/state.bin", OpenFlags{}), OK, nil},
		{"open status for write", open("generations/g000001/status", OpenFlags{Write: true}), EROFS, nil},
		{"open manifest for write", open("generations/g000001/manifest", OpenFlags{Write: true}), EROFS, nil},
		{"open store for write", open("store", OpenFlags{Write: true}), EROFS, nil},
		{"open key for write", open("keys/KEY/key", OpenFlags{Write: true}), EROFS, nil},
		{"open lease for write", open("leases/c1", OpenFlags{Write: true}), OK, nil},
		{"open lease truncating", open("leases/c1", OpenFlags{Write: true, Truncate: true}), OK, leaseOn("c1", 1)},
		{"open lease for write as other", as(other, open("leases/c1", OpenFlags{Write: true})), EACCES, nil},
		{"open lease as other", as(other, open("keys/KEY/leases/c1", OpenFlags{})), OK, nil},
		{"open ctl", open("generations/g000001/ctl", OpenFlags{}), OK, nil},
		{"open ctl truncating", open("generations/g000001/ctl", OpenFlags{Write: true, Truncate: true}), OK, nil},
		{"open ctl for write as other", as(other, open("generations/g000001/ctl", OpenFlags{Write: true})), EACCES, nil},
		{"open directory", open("generations", OpenFlags{}), EISDIR, nil},

		{"touch lease", setattr("leases/c1", ChangeTimes), OK, nil},
		{"touch leases dir", setattr("generations/g000001/leases", ChangeTimes), OK, nil},
		{"touch key leases dir", setattr("keys/KEY/leases", ChangeTimes), OK, nil},
		{"truncate lease", setattr("leases/c1", ChangeSize), OK, leaseOn("c1", 1)},
		{"touch and truncate lease", setattr("leases/c1", ChangeTimes|ChangeSize), OK, leaseOn("c1", 1)},
		{"truncate ctl", setattr("generations/g000001/ctl", ChangeSize|ChangeTimes), OK, nil},
		{"chmod lease", setattr("leases/c1", ChangeMode), EPERM, nil},
		{"chown lease", setattr("generations/g000001/leases/c1", ChangeOwner), EPERM, nil},
		{"truncate and chmod lease", setattr("leases/c1", ChangeSize|ChangeMode), EPERM, nil},
		{"chmod ctl", setattr("generations/g000001/ctl", ChangeMode), EPERM, nil},
		{"truncate leases dir", setattr("leases", ChangeSize), EPERM, nil},
		{"touch lease as other", as(other, setattr("leases/c1", ChangeTimes)), EACCES, nil},
		{"empty setattr as other", as(other, setattr("leases/c1", 0)), OK, nil},
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
		{"setxattr ctl", xattr("generations/g000001/ctl"), EPERM, nil},
		{"setxattr as other", as(other, xattr(pay)), EACCES, nil},

		{"write lease kill reserved", write("leases/c1", "kill\n"), EBUSY, all(leaseState("c1", store.Reserved), refused(1, "write lease c1 EBUSY"))},
		{"write lease cancel", write("leases/c1", "cancel\n"), OK, noLease("c1")},
		{"write lease cancel in generation", write("generations/g000001/leases/c1", "cancel\n"), OK, noLease("c1")},
		{"write lease cancel through key", write("keys/KEY/leases/c5", "cancel"), OK, all(noLease("c5"), retired(5))},
		{"write lease cancel last lease of retiring", write("retiring/g000005/leases/c5", "cancel\n"), OK, retired(5)},
		{"write lease cancel twice", write("leases/c1", "cancel\ncancel\n"), ENOENT, noLease("c1")},
		{"write lease cancel as other", writeBy(other, "leases/c1", "cancel\n"), EACCES, leaseState("c1", store.Reserved)},
		{"write lease no process", write("generations/g000001/leases/c1", noProcess+"\n"), ESRCH, all(leaseState("c1", store.Reserved), refused(1, "write lease c1 ESRCH"))},
		{"write lease bad", write("leases/c1", "bind 1\n"), EINVAL, all(leaseState("c1", store.Reserved), refused(1, "write lease c1 EINVAL"))},
		{"write lease empty", write("leases/c1", ""), OK, leaseState("c1", store.Reserved)},
		{"write lease empty lines", write("leases/c1", "\n\n"), OK, leaseState("c1", store.Reserved)},
		{"write lease cancel then empty line", write("leases/c1", "cancel\n\n"), OK, noLease("c1")},
		{"write lease cancel at close", write("leases/c1", "cancel"), OK, noLease("c1")},
		{"write lease too long", write("leases/c1", "pid "+strings.Repeat("1", MaxCommandLen)+"\n"), EINVAL, leaseState("c1", store.Reserved)},
		{"write lease too long without newline", write("leases/c1", strings.Repeat("k", MaxCommandLen+1)), EINVAL, leaseState("c1", store.Reserved)},
		{"write lease bad at close", write("leases/c1", "bind 1"), EINVAL, all(leaseState("c1", store.Reserved), refused(1, "write lease c1 EINVAL"))},
		{"write lease as other", writeBy(other, "leases/c1", "kill"), EACCES, all(leaseState("c1", store.Reserved), refused(1, "write lease c1 EACCES"))},
		{"write released lease", writeStale("leases/c1", "cancel"), ENOENT, noLease("c1")},
		{"write reacquired lease", writeStale("leases/c1", "cancel", create("generations/g000003/leases/c1", false)), ENOENT, leaseOn("c1", 3)},

		{"ctl tombstone", write("generations/g000001/ctl", "tombstone\n"), OK, tombstonedBy(1, owner.UID)},
		{"ctl tombstone tombstoned", write("tombstones/g000002/ctl", "tombstone"), OK, tombstonedBy(2, 1234)},
		{"ctl tombstone retiring", write("retiring/g000005/ctl", "tombstone\n"), OK, retiringNow(5)},
		{"ctl lift", write("tombstones/g000002/ctl", "lift\n"), OK, state(2, store.Published)},
		{"ctl lift published", write("generations/g000001/ctl", "lift\n"), OK, state(1, store.Published)},
		{"ctl lift retiring", write("retiring/g000005/ctl", "lift\n"), EPERM, all(retiringNow(5), refused(5, "ctl lift EPERM"))},
		{"ctl retire", write("tombstones/g000002/ctl", "retire\n"), OK, all(retiringNow(2), leaseOn("c2", 2))},
		{"ctl retire without leases", seq(write("tombstones/g000002/ctl", "retire\n"), write("leases/c2", "cancel")), OK, retired(2)},
		{"ctl retire retiring", write("retiring/g000005/ctl", "retire"), OK, retiringNow(5)},
		{"ctl retire published", write("generations/g000001/ctl", "retire\n"), EPERM, all(state(1, store.Published), refused(1, "ctl retire EPERM"), refused(1, "not tombstoned"))},
		{"ctl bad", write("generations/g000001/ctl", "delete\n"), EINVAL, all(state(1, store.Published), refused(1, `write ctl EINVAL: `), refused(1, `"delete"`))},
		{"ctl two commands", write("generations/g000001/ctl", "tombstone\nretire\n"), OK, retiringNow(1)},
		{"ctl second command refused", write("tombstones/g000002/ctl", "lift\nretire\nlift\n"), EPERM, all(state(2, store.Published), refused(2, "ctl retire EPERM"))},
		{"ctl tombstone and empty line", write("generations/g000001/ctl", "tombstone\n\n"), OK, tombstonedBy(1, owner.UID)},
		{"ctl as other", writeBy(other, "generations/g000001/ctl", "tombstone\n"), EACCES, all(state(1, store.Published), refused(1, "write ctl EACCES"))},
		{"fallocate lease", allocate("leases/c1"), EOPNOTSUPP, leaseState("c1", store.Reserved)},
		{"fallocate ctl", allocate("generations/g000001/ctl"), EOPNOTSUPP, state(1, store.Published)},
		{"fallocate as other", as(other, allocate("leases/c1")), EACCES, nil},
		{"write payload", write(pay, "x"), EROFS, nil},
		{"write status", write("generations/g000001/status", "x"), EROFS, nil},
		{"write status as other", as(other, write("generations/g000001/status", "x")), EACCES, nil},
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

// all runs every check, returning the first error.
func all(checks ...func(fx *fixture) error) func(fx *fixture) error {
	return func(fx *fixture) error {
		for _, c := range checks {
			if err := c(fx); err != nil {
				return err
			}
		}
		return nil
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
		for _, p := range []string{"leases/" + clone, "keys/KEY/leases/" + clone} {
			if _, err := fx.fs.Walk(fx.expand(p)); err != nil {
				return err
			}
		}
		return nil
	}
}

func leaseState(clone string, want store.LeaseState) func(fx *fixture) error {
	return func(fx *fixture) error {
		l, err := fx.st.Lease(clone)
		if err != nil {
			return err
		}
		if l.State != want {
			return fmt.Errorf("lease %s is %s, want %s", clone, l.State, want)
		}
		return nil
	}
}

func noLease(clone string) func(fx *fixture) error {
	return func(fx *fixture) error {
		if _, err := fx.st.Lease(clone); !errors.Is(err, store.ErrNotFound) {
			return errors.New("lease " + clone + " still exists")
		}
		for _, p := range []string{"leases/" + clone, "keys/KEY/leases/" + clone} {
			if _, err := fx.fs.Walk(fx.expand(p)); ToErrno(err) != ENOENT {
				return errors.New(p + " still listed")
			}
		}
		return nil
	}
}

// stateDirName is the directory generations in each state are listed in.
var stateDirName = map[store.GenerationState]string{
	store.Published: "generations/", store.Tombstoned: "tombstones/", store.Retiring: "retiring/",
}

// state checks generation gen's state, and that it is found only under
// the directory of that state.
func state(gen int, want store.GenerationState) func(fx *fixture) error {
	return func(fx *fixture) error {
		g, err := fx.st.Generation(fx.gens[gen].ID)
		if err != nil {
			return err
		}
		if g.State != want {
			return errors.New(g.ID.String() + " is " + string(g.State) + ", want " + string(want))
		}
		for st, dir := range stateDirName {
			_, err := fx.fs.Walk(dir + g.ID.String())
			if st == want && err != nil {
				return err
			}
			if st != want && ToErrno(err) != ENOENT {
				return fmt.Errorf("%s found under %s too: %v", g.ID, dir, err)
			}
		}
		return nil
	}
}

// retiringNow checks that generation gen is retiring, with a recorded
// intent, and listed under retiring/.
func retiringNow(gen int) func(fx *fixture) error {
	return func(fx *fixture) error {
		if err := state(gen, store.Retiring)(fx); err != nil {
			return err
		}
		if g, _ := fx.st.Generation(fx.gens[gen].ID); g.Retirement == nil {
			return errors.New(g.ID.String() + " has no retirement intent")
		}
		return nil
	}
}

// retired checks that generation gen is gone from the store and the tree.
func retired(gen int) func(fx *fixture) error {
	return func(fx *fixture) error {
		id := fx.gens[gen].ID
		if _, err := fx.st.Generation(id); !errors.Is(err, store.ErrNotFound) {
			return errors.New(id.String() + " still in the store")
		}
		for _, dir := range stateDirName {
			if _, err := fx.fs.Walk(dir + id.String()); ToErrno(err) != ENOENT {
				return errors.New(id.String() + " still under " + dir)
			}
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
			return fmt.Errorf("%s tombstone record %+v, want uid %d", g.ID, g.Tombstone, uid)
		}
		return nil
	}
}

// refused checks that generation gen's status shows a last refusal
// containing want.
func refused(gen int, want string) func(fx *fixture) error {
	return func(fx *fixture) error {
		g, err := fx.st.Generation(fx.gens[gen].ID)
		if err != nil {
			return err
		}
		text, _, err := fx.fs.renderStatus(g)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(text), "\n") {
			if r, ok := strings.CutPrefix(line, "last_refusal: "); ok && strings.Contains(r, want) {
				return nil
			}
		}
		return fmt.Errorf("%s status lacks a last_refusal with %q:\n%s", g.ID, want, text)
	}
}
