//go:build linux && cgo && fuse3

package winfsp

import (
	"testing"

	"templatefs/leasefs"
	"templatefs/tests/conformance"
)

func TestMain(m *testing.M) { conformance.Main(m) }

// TestConformance runs the mount-level suite against cgofuse over
// libfuse3. lseek has no cgofuse callback, cgofuse's init clears
// libfuse's entry and attribute timeouts (docs/windows.md, "Timeouts"),
// it opens texts without direct_io, and has no fallocate callback.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Backend{Name: "cgofuse", Mount: mountFunc, NoSeekData: true, UncachedAttrs: true, MappableText: true, NoFallocate: true})
}

// mountFunc is the conformance.MountFunc of cgofuse.
func mountFunc(lfs *leasefs.FS, mnt string, opts conformance.MountOptions) (func() error, error) {
	m, err := mount(mnt, lfs, MountOptions{AllowOther: opts.AllowOther}, opts.Requests, opts.Xattrs)
	if err != nil {
		return nil, err
	}
	return m.Unmount, nil
}
