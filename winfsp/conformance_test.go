//go:build linux && cgo && fuse3

package winfsp

import (
	"errors"
	"sync/atomic"
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

// opTally is an Observer counting the callbacks it is told of.
type opTally struct{ n atomic.Int64 }

func (o *opTally) FUSEOp(string) { o.n.Add(1) }

// mountFunc is the conformance.MountFunc of cgofuse. It serves through
// the counting file system (Observer), as the daemon does, and its
// unmount fails if that saw no callback.
func mountFunc(lfs *leasefs.FS, mnt string, opts conformance.MountOptions) (func() error, error) {
	tally := &opTally{}
	m, err := mount(mnt, lfs, MountOptions{AllowOther: opts.AllowOther, Observer: tally}, opts.Requests, opts.GetXattrs, opts.ListXattrs)
	if err != nil {
		return nil, err
	}
	return func() error {
		err := m.Unmount()
		if err == nil && tally.n.Load() == 0 {
			err = errors.New("the counting file system saw no callback")
		}
		return err
	}, nil
}
