package leasefs

import "testing"

func TestCheckRemove(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for _, tc := range []struct {
		path   string
		caller Caller
		want   Errno
	}{
		{"leases/c1", owner, OK},
		{"generations/g000001/leases/c1", owner, OK},
		{"keys/KEY/leases/c1", owner, OK},
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
