package store

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// maxGroup bounds how many requests share one transaction, as bbolt's
// DefaultMaxBatchSize does: a bigger group holds the writer longer and
// costs more to rerun when one request fails.
const maxGroup = 1000

// groupCommitter runs write transactions for concurrent callers so that
// they share fsyncs (a group commit) while each caller still returns only
// after its own request is durable (fuse-and-store-notes.md §E3: a bbolt
// commit is two fdatasyncs, the cost that dominates a lease).
//
// Unlike bolt.DB.Batch it never waits for a group to fill: bbolt waits up
// to MaxBatchDelay (10 ms), which made 8 concurrent writers about 9 times
// slower than serial Updates (project issue 5). Here a request submitted
// while nothing is in flight is committed at once, by its own caller; the
// requests that arrive while a commit is in flight are gathered and run
// together in the next transaction, led by the first of them. One caller
// is thus never slower than a plain Update, and N callers need at most N
// commits.
//
// A request function must be side-effect free outside its transaction:
// it may run more than once (see commit), and only its last run counts.
type groupCommitter struct {
	// run runs one read-write transaction and commits it (Store.update
	// at the lease's error point, or bolt.DB.Update).
	run func(func(*bolt.Tx) error) error
	// observe is told the size of each committed group (Observer).
	observe func(requests int)

	mu      sync.Mutex
	busy    bool             // a leader is running a group now
	pending []*commitRequest // submitted, not yet in a group; pending[0] leads next
}

// commitRequest is one submitted function and where its outcome goes.
type commitRequest struct {
	fn func(*bolt.Tx) error
	// done receives lead (this caller runs the next group) or, once, the
	// request's own result. Buffered so that a leader never blocks.
	done chan commitOutcome
	err  error // the result, set by the leader before it is sent
}

type commitOutcome struct {
	lead bool
	err  error
}

func newGroupCommitter(run func(func(*bolt.Tx) error) error) *groupCommitter {
	return &groupCommitter{run: run, observe: func(int) {}}
}

// update runs fn in a read-write transaction, possibly shared with other
// callers' functions, and returns once that transaction has committed
// (fn's writes are durable) or fn's own error, in which case none of fn's
// writes were committed. Another request's failure is never returned here
// and never undoes fn, with one exception: a panic inside the transaction
// (fn's or bbolt's) is index damage (index.Update), and fails every
// request of the group with ErrIndexCorrupt. fn may run more than once
// (commit) and must therefore only change state through tx.
func (c *groupCommitter) update(fn func(*bolt.Tx) error) error {
	r := &commitRequest{fn: fn, done: make(chan commitOutcome, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, r)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()
	if !lead {
		if o := <-r.done; !o.lead {
			return o.err
		}
	}
	c.lead()
	return (<-r.done).err
}

// lead takes the pending requests (up to maxGroup), commits them as one
// group, hands leadership to the first request that arrived in the
// meantime (or marks the committer idle), and sends the group's results.
func (c *groupCommitter) lead() {
	c.mu.Lock()
	n := min(len(c.pending), maxGroup)
	group := c.pending[:n:n]
	c.pending = c.pending[n:]
	c.mu.Unlock()

	c.commit(group)

	c.mu.Lock()
	var next *commitRequest
	if len(c.pending) > 0 {
		next = c.pending[0]
	} else {
		c.busy = false
		c.pending = nil
	}
	c.mu.Unlock()
	if next != nil {
		next.done <- commitOutcome{lead: true}
	}
	for _, r := range group {
		r.done <- commitOutcome{err: r.err}
	}
}

// commit sets each request's err. It runs the group in one transaction in
// submission order. bbolt has no savepoints, so when a request fails the
// transaction is rolled back (no fsync), the failed request is set aside
// and the rest run again, as bolt.DB.Batch does; once the rest has
// committed, each set-aside request runs alone, after them, and its own
// outcome (its error, or a commit if the state it failed on has changed)
// is what its caller gets. The result is the same as running the requests
// serially with the failed ones last.
func (c *groupCommitter) commit(group []*commitRequest) {
	var failed []*commitRequest
	for len(group) > 0 {
		bad := -1
		err := c.run(func(tx *bolt.Tx) error {
			for i, r := range group {
				if err := r.fn(tx); err != nil {
					bad = i
					return err
				}
			}
			return nil
		})
		if bad < 0 {
			for _, r := range group {
				r.err = err
			}
			if err == nil {
				c.observe(len(group))
			}
			break
		}
		failed = append(failed, group[bad])
		group = append(group[:bad:bad], group[bad+1:]...)
	}
	for _, r := range failed {
		r.err = c.run(r.fn)
	}
}
