package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// The durable steps of the write paths: index commits, file and directory
// fsyncs. Each takes the error point (faultPoint) placed just before it.
//
// A failed fsync or commit is not retried as if nothing had happened. On
// Linux a failed writeback marks the dirty pages clean (or drops them),
// so a later fsync can succeed although the data never reached the disk;
// and bbolt's commit may have written the new meta page whose fdatasync
// failed, which the next transaction would then read from the page cache.
// What is on disk is unknown until the store is read again from disk, so
// the store stops accepting changes (setReadOnly); a restart (a new Open)
// re-reads it. Errors that change nothing on disk (a refusal inside a
// transaction, a failed payload write, rename or removal) leave the store
// writable.

// syncError is a failed fsync: the data it was to make durable may be
// lost although the writes succeeded.
type syncError struct{ err error }

func (e *syncError) Error() string { return e.err.Error() }
func (e *syncError) Unwrap() error { return e.err }

// syncFile fsyncs f (FlushFileBuffers on Windows). Its error is a
// *syncError wrapping the errno.
func syncFile(p faultPoint, f *os.File) error {
	err := fault(p)
	if err == nil {
		err = f.Sync() // an *os.PathError, Op "sync"
	} else {
		err = &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	if err != nil {
		return &syncError{err}
	}
	return nil
}

// syncDirAt is syncDir at error point p. Its error is a *syncError.
func syncDirAt(p faultPoint, path string) error {
	err := fault(p)
	if err == nil {
		err = syncDir(path)
	} else {
		err = fmt.Errorf("fsync directory %s: %w", path, err)
	}
	if err != nil {
		return &syncError{err}
	}
	return nil
}

// removeAt removes path and everything below it (os.RemoveAll) at error
// point p.
func removeAt(p faultPoint, path string) error {
	if err := fault(p); err != nil {
		return &os.PathError{Op: "unlinkat", Path: path, Err: err}
	}
	return os.RemoveAll(path)
}

// readOnlyAfterSync makes the store read-only if err is or wraps a failed
// fsync (*syncError), and returns err.
func (s *Store) readOnlyAfterSync(err error) error {
	if se := (*syncError)(nil); errors.As(err, &se) {
		s.setReadOnly(err)
	}
	return err
}

// errUnchanged rolls back an Update that found nothing to write, so a
// retried call does not pay for a commit.
var errUnchanged = errors.New("unchanged")

// update runs fn in a read-write transaction and commits it, with error
// point p just before the commit (an error returned from inside the
// transaction rolls it back, as a failed commit does). fn's own error is
// a refusal: nothing was written, and it is returned as it is. An error
// of the commit itself (bbolt's page writes or fdatasyncs, or p armed)
// means the index's durability is unknown: the store turns read-only and
// the error, wrapping bbolt's (and its errno), is returned. A store
// already read-only refuses before fn runs, with ErrReadOnly (index.Update).
func (s *Store) update(p faultPoint, fn func(*bolt.Tx) error) error {
	ran := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		ran = true
		return fault(p)
	})
	if err != nil && ran {
		err = fmt.Errorf("commit index %s: %w", filepath.Join(s.dir, IndexFile), err)
		s.setReadOnly(err)
	}
	return err
}
