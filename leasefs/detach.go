package leasefs

import (
	"errors"
	"fmt"
	"sync"
)

// ErrDetached is returned by every FS entry point that would read or
// change the store once Detach has been called: the daemon is stopping,
// its mount is detached and its store closed (a new daemon may already
// own it). Handles opened before keep what they hold: a payload's backing
// file, an index snapshot, the text rendered at open. A write to an open
// lease or ctl file fails with it and changes nothing.
var ErrDetached = errors.New("the daemon serving this mount has stopped and released the store: only files opened before stay readable; use the mount of the running daemon")

// gate admits FS calls that touch the store until Detach closes it. It
// counts calls in flight rather than holding a lock across them, so a
// call may enter again from inside another (Create calls Lookup) without
// deadlocking against a waiting Detach.
type gate struct {
	mu       sync.Mutex
	inflight int
	detached bool
	idle     chan struct{} // made by a waiting Detach, closed by the last call to leave
}

// enter admits one call of op to the store, or returns ErrDetached. Each
// nil return must be paired with one leave.
func (f *FS) enter(op string) error {
	g := &f.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.detached {
		return fmt.Errorf("%s: %w", op, ErrDetached)
	}
	g.inflight++
	return nil
}

// leave ends a call admitted by enter.
func (f *FS) leave() {
	g := &f.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.inflight == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// Detach stops f from touching its store, for good: from its return on,
// every entry point that would read or change the store returns
// ErrDetached, and no call admitted before is still running (Detach waits
// for them, a `kill` write's bounded wait included). The caller may then
// close the store. Reads of open handles (Handle.Data, Handle.File,
// Handle.Snapshot) need no store and keep working. Detach is idempotent
// and safe for concurrent use.
//
// Entry points that touch the store: Lookup, Walk, ReadDir, ReadDirFrom, ReadDirPlusFrom,
// Attr, SetAttr, Open, Create, Remove, Rmdir, MakeEntry, Rename,
// CheckRemove, and Commands.Write and Commands.Flush. A new one
// must call f.enter first (detach_test.go lists every exported method).
func (f *FS) Detach() {
	g := &f.gate
	g.mu.Lock()
	g.detached = true
	if g.inflight == 0 {
		g.mu.Unlock()
		return
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	<-idle
}

// Detached reports whether Detach has been called.
func (f *FS) Detached() bool {
	f.gate.mu.Lock()
	defer f.gate.mu.Unlock()
	return f.gate.detached
}

// OpenAttr returns what fstat(2) of handle h, just opened on n, reports
// once leasefs can no longer answer for n (the daemon has detached, or n
// is gone): n's attributes now, with the size and blocks of what h
// serves: its rendered text (Data), its index snapshot, its payload's
// backing file; an events stream has size 0. Adapters call it right
// after the open and keep the result with the handle, for that one
// fallback: while Attr answers, it is the truth. The handle of a create
// that reserved its lease gets the lease's attributes as created
// (Created.Attr) without a store read, which would wait for the lease's
// commit. Errors: Attr's, or the stat of h's file.
func (f *FS) OpenAttr(n Node, h Handle) (Attr, error) {
	if h.Commands != nil && h.Commands.created != nil {
		return h.Commands.created.attr, nil // as created: its commit may be running
	}
	a, err := f.Attr(n)
	if err != nil {
		return Attr{}, err
	}
	file := h.File
	if file == nil {
		file = h.Snapshot
	}
	switch {
	case file != nil:
		fi, err := file.Stat()
		if err != nil {
			return Attr{}, fmt.Errorf("stat open %s: %w", n, err)
		}
		a.Size = fi.Size()
		if h.File != nil {
			a.Blocks, a.Blksize = allocated(fi)
		} else {
			a.Blocks = (a.Size + 511) / 512
		}
	case h.Events == nil && h.Incoming == nil:
		a.setText(h.Data)
	}
	return a, nil
}
