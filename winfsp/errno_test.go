//go:build linux && cgo && fuse3

package winfsp

import (
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// TestToFuse walks every leasefs.Errno through the adapter: each maps to
// the negative Linux errno of the same name, and distinct values stay
// distinct.
func TestToFuse(t *testing.T) {
	seen := map[int]leasefs.Errno{}
	for _, e := range leasefs.Errnos() {
		got := toFuse(e)
		if e == leasefs.OK {
			if got != 0 {
				t.Errorf("OK -> %d, want 0", got)
			}
			continue
		}
		// Linux has one number for EOPNOTSUPP and ENOTSUP, named ENOTSUP.
		if name := unix.ErrnoName(syscall.Errno(-got)); got >= 0 || name != e.String() && !(e == leasefs.EOPNOTSUPP && name == "ENOTSUP") {
			t.Errorf("%v -> %d (%s)", e, got, name)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%v and %v both map to %d", prev, e, got)
		}
		seen[got] = e
	}
	if got := toFuse(leasefs.Errno(len(leasefs.Errnos()))); got != -int(syscall.EIO) {
		t.Errorf("unknown Errno -> %d, want -EIO", got)
	}
}

// TestArgs checks the libfuse3 command line: no timeout options (cgofuse
// would clear them), allow_other only when asked.
func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts MountOptions
		want []string
	}{
		{"default", MountOptions{}, []string{"-o", "fsname=templatefs,subtype=templatefs"}},
		{"allow other", MountOptions{AllowOther: true}, []string{"-o", "fsname=templatefs,subtype=templatefs,allow_other"}},
		{"debug", MountOptions{Debug: true}, []string{"-o", "fsname=templatefs,subtype=templatefs", "-d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := args(tc.opts); !slices.Equal(got, tc.want) {
				t.Errorf("args(%+v) = %q, want %q", tc.opts, got, tc.want)
			}
		})
	}
}
