package store

import "hash"

// Progress, when not nil, is told how many bytes of a long step are done
// (done, of total) as it proceeds: the copy of a publication
// (PublishOptions.Progress), the hashing of CheckOptions.Digests and
// Verify. It is called from the goroutine doing the work, after every
// block of at most 1 MiB, and last with done == total when the step ends
// normally; it should return quickly.
type Progress func(done, total int64)

// progressCounter adds up the bytes of one step across its files. A nil
// *progressCounter, or one with no fn, counts nothing.
type progressCounter struct {
	fn          Progress
	done, total int64
}

func newProgress(fn Progress, total int64) *progressCounter {
	if fn == nil {
		return nil
	}
	return &progressCounter{fn: fn, total: total}
}

// add counts n more bytes done, up to total (a damaged file may be
// longer than its record), so done only grows and never passes total.
func (p *progressCounter) add(n int64) {
	if p == nil || n <= 0 || p.done == p.total {
		return
	}
	p.done = min(p.done+n, p.total)
	p.fn(p.done, p.total)
}

// Write counts len(b) bytes, so that a counter can sit beside a hash in
// an io.MultiWriter.
func (p *progressCounter) Write(b []byte) (int, error) {
	p.add(int64(len(b)))
	return len(b), nil
}

// countingHash is h, counting every byte written to it in p.
type countingHash struct {
	hash.Hash
	p *progressCounter
}

func (c countingHash) Write(b []byte) (int, error) {
	c.p.add(int64(len(b)))
	return c.Hash.Write(b)
}
