package leasefs

import (
	"testing"

	"templatefs/store"
)

func TestCheckRemove(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for _, tc := range []struct {
		path   string
		caller Caller
		want   Errno
	}{
		{"leases/c1", owner, EBUSY}, // reserved: cancel ends it
		{"generations/g000001/leases/c1", owner, EBUSY},
		{"keys/KEY/leases/c1", owner, EBUSY},
		{"generations/g000001", owner, OK},
		{"tombstones/g000002", owner, OK},
		{"retiring/g000005", owner, OK},
		{"leases/c1", other, EACCES},
		{"generations/g000001/status", owner, EPERM},
		{"generations/g000001/payload/state.bin", owner, EPERM},
		{"generations/g000001/leases", owner, EPERM},
		{"generations", owner, EPERM},
		{"leases/nope", owner, ENOENT},
		{"generations/g000002", owner, ENOENT},
	} {
		t.Run(tc.path, func(t *testing.T) {
			dir, name := fx.parent(tc.path)
			if got := ToErrno(fx.fs.CheckRemove(dir, name, tc.caller)); got != tc.want {
				t.Errorf("CheckRemove(%s) as uid %d: %v, want %v", tc.path, tc.caller.UID, got, tc.want)
			}
		})
	}
}

// TestCheckRemoveRelease: before a Windows delete, CheckRemove refuses a
// lease whose release the store would refuse (WinFsp ignores the unlink's
// own result), with the errno rm gets, and changes nothing.
func TestCheckRemoveRelease(t *testing.T) {
	capture := makeCaptures(t)
	for _, tc := range []struct {
		name    string
		verdict store.ExitVerdict
		want    Errno
	}{
		{"alive", store.ProcessAlive, EBUSY},
		{"hidden", store.ProcessUninspectable, EPERM},
		{"exited", store.ProcessExited, OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procs := &fakeProcs{verdict: tc.verdict}
			fx := newFixtureWith(t, capture, procs)
			if err := write("leases/c1", "pid 42")(fx); err != nil {
				t.Fatal(err)
			}
			dir, name := fx.parent("leases/c1")
			if got := ToErrno(fx.fs.CheckRemove(dir, name, owner)); got != tc.want {
				t.Errorf("CheckRemove of a lease whose process is %s: %v, want %v", tc.name, got, tc.want)
			}
			if got := ToErrno(fx.fs.Remove(dir, name, owner)); got != tc.want {
				t.Errorf("Remove after CheckRemove: %v, want the same %v", got, tc.want)
			}
		})
	}
}
