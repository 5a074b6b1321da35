package store

import "time"

// Observer is told what the store does, for metrics (cmd/templatefs
// feeds internal/metrics from it). The store calls it synchronously, on
// the goroutine that did the work and outside its transactions; its
// methods must be cheap, safe for concurrent use, and must not call back
// into the store. It decides nothing: the store behaves the same with or
// without one.
type Observer interface {
	// LeaseOp reports one lease operation, its duration and its error
	// (nil: durable): "create" (an acquisition or reservation, from its
	// start to the commit of its record, whether or not anyone waits for
	// it), "bind" (BindLease, BindLaunched) or "release" (ReleaseLease).
	LeaseOp(op string, d time.Duration, err error)
	// GroupCommit reports one committed group of lease acquisitions and
	// how many requests it held (commit.go).
	GroupCommit(requests int)
	// IndexCommit reports how long one committed write transaction's
	// commit took: bbolt's page writes and fdatasyncs.
	IndexCommit(d time.Duration)
	// Published reports one publication that made a new generation: the
	// bytes of its artifacts (logical sizes) and how long it took.
	Published(bytes int64, d time.Duration)
	// EventsDropped reports n events dropped for an events reader that
	// fell more than EventBuffer behind.
	EventsDropped(n int)
}

// noObserver is the Observer of a store opened without one.
type noObserver struct{}

func (noObserver) LeaseOp(string, time.Duration, error) {}
func (noObserver) GroupCommit(int)                      {}
func (noObserver) IndexCommit(time.Duration)            {}
func (noObserver) Published(int64, time.Duration)       {}
func (noObserver) EventsDropped(int)                    {}

// observer is the store's Observer (Options.Observer), or noObserver
// when it has none.
func (s *Store) observer() Observer {
	if s.obs == nil {
		return noObserver{}
	}
	return s.obs
}

// observeLeaseOp reports op, begun at start, with its outcome *err: call
// it deferred, as defer s.observeLeaseOp("bind", time.Now(), &err).
func (s *Store) observeLeaseOp(op string, start time.Time, err *error) {
	s.observer().LeaseOp(op, time.Since(start), *err)
}

// artifactBytes is the sum of g's artifact sizes.
func artifactBytes(g Generation) int64 {
	var n int64
	for _, a := range g.Artifacts {
		n += a.Size
	}
	return n
}
