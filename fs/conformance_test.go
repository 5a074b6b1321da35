//go:build linux

package fs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"templatefs/leasefs"
	"templatefs/tests/conformance"
)

func TestMain(m *testing.M) { conformance.Main(m) }

// TestConformance runs the mount-level suite against go-fuse.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Backend{Name: "go-fuse", Mount: mount})
}

// opTally is an Observer counting the requests it is told of.
type opTally struct{ n atomic.Int64 }

func (o *opTally) FUSEOp(string)    { o.n.Add(1) }
func (o *opTally) Passthrough(bool) {}

// mount is the conformance.MountFunc of go-fuse. To count requests it
// turns on go-fuse's debug log and counts its "rx" lines. It serves
// through the counting file system (Observer), as the daemon does, and
// its unmount fails if that saw no request.
func mount(lfs *leasefs.FS, mnt string, opts conformance.MountOptions) (func() error, error) {
	tally := &opTally{}
	mo := MountOptions{AllowOther: opts.AllowOther, Logger: slog.New(slog.DiscardHandler), Observer: tally}
	if opts.Requests != nil || opts.GetXattrs != nil || opts.ListXattrs != nil {
		mo.Debug, mo.Logger = true, slog.New(requestCounter{opts.Requests, opts.GetXattrs, opts.ListXattrs})
	}
	srv, err := Mount(mnt, lfs, mo)
	if err != nil {
		return nil, err
	}
	return func() error {
		err := srv.Unmount()
		srv.Wait()
		if err == nil && tally.n.Load() == 0 {
			err = errors.New("the counting file system saw no request")
		}
		return err
	}, nil
}

// requestCounter is a slog.Handler counting go-fuse's debug lines for
// LOOKUP and GETATTR requests ("rx 12: LOOKUP n1 ...") in lookups, for
// GETXATTR in getxattrs and for LISTXATTR in listxattrs (each if set),
// dropping all other output.
type requestCounter struct{ lookups, getxattrs, listxattrs *atomic.Int64 }

func (c requestCounter) Enabled(context.Context, slog.Level) bool { return true }

func (c requestCounter) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "rx ") {
		return nil
	}
	count := func(n *atomic.Int64, ops ...string) {
		for _, op := range ops {
			if n != nil && strings.Contains(r.Message, ": "+op+" ") {
				n.Add(1)
			}
		}
	}
	count(c.lookups, "LOOKUP", "GETATTR")
	count(c.getxattrs, "GETXATTR")
	count(c.listxattrs, "LISTXATTR")
	return nil
}

func (c requestCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c requestCounter) WithGroup(string) slog.Handler      { return c }
