package store

import (
	"errors"
	"fmt"
	"time"
)

// ErrReadOnly is returned by every state-changing Store method once the
// store has stopped accepting changes (Store.ReadOnly): the index showed
// damage while the store was open, or a failed fsync left the state on
// disk unknown. Nothing is changed; reads keep working where they can.
// Only a new Open (a restart of the daemon) clears it, after the cause is
// dealt with.
var ErrReadOnly = errors.New("store is read-only")

// readOnlyError is what Store.ReadOnly returns: the reason the store went
// read-only and when. It matches ErrReadOnly and the reason (errors.Is).
type readOnlyError struct {
	since  time.Time
	reason error
}

func (e *readOnlyError) Error() string {
	return fmt.Sprintf("%v since %s: %v", ErrReadOnly, e.since.UTC().Format(time.RFC3339), e.reason)
}

func (e *readOnlyError) Unwrap() []error { return []error{ErrReadOnly, e.reason} }

// ReadOnly returns nil while the store accepts changes. Otherwise it
// returns an error wrapping ErrReadOnly (and the reason) that names the
// reason and when the store went read-only; every state-changing method
// then fails with it before changing anything.
func (s *Store) ReadOnly() error {
	if e := s.readOnly.Load(); e != nil {
		return e
	}
	return nil
}

// setReadOnly makes the store refuse every further change, for reason
// (which must not be nil). The first reason wins and is logged once, at
// error level; later calls change nothing. It is safe for concurrent use.
func (s *Store) setReadOnly(reason error) {
	e := &readOnlyError{since: s.now(), reason: reason}
	if s.readOnly.CompareAndSwap(nil, e) {
		s.log.Error("store is read-only from now on; restart the daemon once the cause is dealt with", "store", s.dir, "reason", reason)
	}
}

// ReadOnlySince returns when the store went read-only, or the zero time
// while it accepts changes: the mtime MNT/store shows for that change.
func (s *Store) ReadOnlySince() time.Time {
	if e := s.readOnly.Load(); e != nil {
		return e.since
	}
	return time.Time{}
}
