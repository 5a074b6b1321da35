package store

import (
	"context"
	"sync"
	"time"
)

// EventKind names a state change of the store, as MNT/events prints it.
type EventKind string

// Event kinds: one per state change a caller can observe.
const (
	EventPublished          EventKind = "published"           // a generation was published
	EventLeaseCreated       EventKind = "lease-created"       // a lease was acquired (state reserved)
	EventLeaseBound         EventKind = "lease-bound"         // a lease was bound to a process
	EventLeaseExited        EventKind = "lease-exited"        // a bound lease's process exited (state exited)
	EventLeaseSettled       EventKind = "lease-settled"       // a bound or exited lease was removed after its process exited
	EventLeaseCancelled     EventKind = "lease-cancelled"     // a reserved lease was cancelled
	EventTombstoned         EventKind = "tombstoned"          // a generation was tombstoned
	EventLifted             EventKind = "lifted"              // a tombstone was lifted
	EventRetirementStarted  EventKind = "retirement-started"  // a generation entered state retiring
	EventRetirementFinished EventKind = "retirement-finished" // a retiring generation was deleted
	EventSettings           EventKind = "settings"            // the eligibility settings changed
)

// Event is one state change, emitted after it is durable. Seq numbers the
// events of one open store from 1, without gaps; At is when it was
// emitted. The other fields are set where they apply.
type Event struct {
	Seq        uint64       `json:"seq"`
	At         time.Time    `json:"at"`
	Kind       EventKind    `json:"event"`
	Generation GenerationID `json:"generation,omitempty"`
	KeyID      string       `json:"key_id,omitempty"`
	CloneID    string       `json:"clone_id,omitempty"`
	LeaseSeq   uint64       `json:"lease_seq,omitempty"`
	PID        int          `json:"pid,omitempty"`
}

// EventBuffer is how many events a subscriber may fall behind by before
// it loses events: past it, the oldest are dropped and counted, and the
// next Next reports how many.
const EventBuffer = 4096

// events fans emitted events out to subscribers. Emitting never blocks.
type events struct {
	mu     sync.Mutex
	seq    uint64
	subs   map[*EventStream]struct{}
	closed bool // the store is closed: new streams start closed
}

// EventStream is one subscriber's view of the store's events from the
// moment it subscribed (Store.Subscribe).
type EventStream struct {
	owner  *events
	mu     sync.Mutex
	queue  []Event
	missed uint64
	wake   chan struct{} // holds a token while queue or missed is non-empty
	closed bool
}

// emit stamps e with the next sequence number and the time, and queues it
// for every subscriber. Callers emit after the change is durable.
func (s *Store) emit(e Event) {
	ev := &s.events
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.seq++
	e.Seq, e.At = ev.seq, s.now().UTC()
	for sub := range ev.subs {
		if sub.push(e) {
			s.observer().EventsDropped(1)
		}
	}
}

// Subscribe returns a stream of every event emitted from now on. The
// caller must Close it. On a closed store the stream is already closed.
func (s *Store) Subscribe() *EventStream {
	ev := &s.events
	sub := &EventStream{owner: ev, wake: make(chan struct{}, 1)}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.closed {
		sub.closed = true
		return sub
	}
	if ev.subs == nil {
		ev.subs = map[*EventStream]struct{}{}
	}
	ev.subs[sub] = struct{}{}
	return sub
}

// push queues e, dropping the oldest event queued when the stream is
// EventBuffer behind, and reports whether it dropped one.
func (sub *EventStream) push(e Event) (dropped bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.queue) == EventBuffer {
		sub.queue = sub.queue[1:]
		sub.missed++
		dropped = true
	}
	sub.queue = append(sub.queue, e)
	select {
	case sub.wake <- struct{}{}:
	default:
	}
	return dropped
}

// Next waits for events and returns those queued, oldest first, with the
// number of events dropped before them because the subscriber fell more
// than EventBuffer behind. It returns ctx's error when ctx ends first,
// and ErrClosed after Close.
func (sub *EventStream) Next(ctx context.Context) (evs []Event, missed uint64, err error) {
	for {
		sub.mu.Lock()
		if sub.closed {
			sub.mu.Unlock()
			return nil, 0, ErrClosed
		}
		if len(sub.queue) > 0 || sub.missed > 0 {
			evs, missed = sub.queue, sub.missed
			sub.queue, sub.missed = nil, 0
			sub.mu.Unlock()
			return evs, missed, nil
		}
		sub.mu.Unlock()
		select {
		case <-sub.wake:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// closeAll closes every subscription: the store is closing.
func (ev *events) closeAll() {
	ev.mu.Lock()
	subs := ev.subs
	ev.subs, ev.closed = nil, true
	ev.mu.Unlock()
	for sub := range subs {
		sub.Close()
	}
}

// Close ends the subscription; a Next waiting on it returns ErrClosed.
func (sub *EventStream) Close() {
	sub.owner.mu.Lock()
	delete(sub.owner.subs, sub)
	sub.owner.mu.Unlock()
	sub.mu.Lock()
	sub.closed = true
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}
