package store

import (
	"fmt"
	"hash"
	"sync/atomic"
)

// Progress, when not nil, is told how many bytes of a long step are done
// (done, of total) as it proceeds: the copy of a publication
// (PublishOptions.Progress), the hashing of CheckOptions.Digests and
// Verify. It is called from the goroutine doing the work, after every
// block of at most 1 MiB, and last with done == total when the step ends
// normally; it should return quickly.
type Progress func(done, total int64)

// progressCounter adds up the bytes of one long step across its files,
// and ends the step once the store is interrupted (Store.Interrupt). A nil
// *progressCounter counts nothing and is never interrupted.
type progressCounter struct {
	fn          Progress // nil: nobody watches
	done, total int64
	stop        *atomic.Bool // the store's interrupted flag
}

// newProgress starts counting a long step of total bytes, reporting to fn
// (which may be nil).
func (s *Store) newProgress(fn Progress, total int64) *progressCounter {
	return &progressCounter{fn: fn, total: total, stop: &s.interrupted}
}

// Interrupt ends the long steps in progress and those started later (a
// publication's copy or hashing, the digest checks of Check and Verify):
// each fails at its next block with ErrInterrupted, and the operation
// fails as it would on a read error, changing nothing it has not
// committed (a publication's staging directory is removed; its ID stays
// burned). A stopping daemon calls it so that it can release the store at
// once instead of waiting for a long operation a client handed it.
func (s *Store) Interrupt() { s.interrupted.Store(true) }

// add counts n more bytes done, up to total (a damaged file may be
// longer than its record), so done only grows and never passes total.
// It returns ErrInterrupted once the store is interrupted.
func (p *progressCounter) add(n int64) error {
	if p == nil {
		return nil
	}
	if p.stop.Load() {
		return fmt.Errorf("stopped after %d of %d bytes: %w", p.done, p.total, ErrInterrupted)
	}
	if p.fn == nil || n <= 0 || p.done == p.total {
		return nil
	}
	p.done = min(p.done+n, p.total)
	p.fn(p.done, p.total)
	return nil
}

// countingHash is h, counting every byte written to it in p; a write
// fails with ErrInterrupted once the store is interrupted.
type countingHash struct {
	hash.Hash
	p *progressCounter
}

func (c countingHash) Write(b []byte) (int, error) {
	if err := c.p.add(int64(len(b))); err != nil {
		return 0, err
	}
	return c.Hash.Write(b)
}

// Interrupted returns ErrInterrupted once the store is interrupted
// (Interrupt), nil before: a long step outside the store (a push's
// upload, a pull's download) checks it after every block.
func (s *Store) Interrupted() error {
	if s.interrupted.Load() {
		return ErrInterrupted
	}
	return nil
}
