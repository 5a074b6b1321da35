//go:build linux

package fs

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// TestToSyscall walks every leasefs.Errno through the adapter: each maps
// to the Linux errno of the same name, and distinct values stay distinct.
func TestToSyscall(t *testing.T) {
	seen := map[syscall.Errno]leasefs.Errno{}
	for _, e := range leasefs.Errnos() {
		got := toSyscall(e)
		if e == leasefs.OK {
			if got != 0 {
				t.Errorf("OK -> %v, want 0", got)
			}
			continue
		}
		// Linux has one number for EOPNOTSUPP and ENOTSUP, named ENOTSUP.
		if name := unix.ErrnoName(got); name != e.String() && !(e == leasefs.EOPNOTSUPP && name == "ENOTSUP") {
			t.Errorf("%v -> %s (%d)", e, name, int(got))
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%v and %v both map to %v", prev, e, got)
		}
		seen[got] = e
	}
	if got := toSyscall(leasefs.Errno(len(leasefs.Errnos()))); got != syscall.EIO {
		t.Errorf("unknown Errno -> %v, want EIO", got)
	}
}
