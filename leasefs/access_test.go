package leasefs

import (
	"math"
	"testing"
)

// TestSetOwners: with WinFsp's uids as the owners (a local account's
// 0x30000+RID and LocalSystem's 18), exactly those callers may change the
// tree. Root's 0, the unmapped -1 and the store's POSIX owner uid no
// longer may: on Windows they are not the caller's identity.
func TestSetOwners(t *testing.T) {
	const user, system = 0x30000 + 1001, 18
	fx := newFixture(t, makeCaptures(t))
	fx.fs.SetOwners([]uint32{user, system})
	for _, tc := range []struct {
		uid  uint32
		want Errno
	}{
		{user, OK},
		{system, OK},
		{0, EACCES},
		{math.MaxUint32, EACCES},
		{owner.UID, EACCES},
		{user + 1, EACCES},
	} {
		c := Caller{UID: tc.uid}
		dir, name := fx.parent("generations/g000001/leases/w1")
		if err := createClosed(fx.fs, dir, name, false, c); ToErrno(err) != tc.want {
			t.Errorf("create as uid %d: %v, want %v", tc.uid, err, tc.want)
		}
		dir, name = fx.parent("generations/g000001/leases/w1")
		if err := fx.fs.CheckRemove(dir, name, c); tc.want != OK && ToErrno(err) != tc.want {
			t.Errorf("delete check as uid %d: %v, want %v", tc.uid, err, tc.want)
		}
	}
	fx.fs.SetOwners(nil)
	if _, err := fx.fs.Walk("generations/g000001/leases/w1"); err != nil {
		t.Fatal(err)
	}
	dir, name := fx.parent("generations/g000001/leases/w1")
	if err := fx.fs.Remove(dir, name, Caller{UID: user}); ToErrno(err) != EACCES {
		t.Errorf("remove with no owners: %v, want EACCES", err)
	}
}
