package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"templatefs/internal/hostclock"
)

// dropCounter is an Observer counting the events dropped.
type dropCounter struct {
	noObserver
	dropped int
}

func (d *dropCounter) EventsDropped(n int) { d.dropped += n }

// TestEventStream: a stream gets every event from its subscription on,
// numbered without gaps; past EventBuffer the oldest are dropped and
// counted, also to the Observer; Close and the store's closing end it,
// and a stream subscribed after the store closed starts closed.
func TestEventStream(t *testing.T) {
	drops := &dropCounter{}
	s := &Store{now: hostclock.Now, obs: drops}
	s.emit(Event{Kind: EventSettings}) // before anyone listens
	sub := s.Subscribe()
	const over = 3
	for range EventBuffer + over {
		s.emit(Event{Kind: EventPublished, Generation: 1})
	}
	evs, missed, err := sub.Next(context.Background())
	if err != nil || missed != over || len(evs) != EventBuffer {
		t.Fatalf("Next: %d events, missed %d, %v; want %d, %d", len(evs), missed, err, EventBuffer, over)
	}
	if drops.dropped != over {
		t.Errorf("Observer told of %d events dropped, want %d", drops.dropped, over)
	}
	for i, e := range evs {
		if want := uint64(2 + over + i); e.Seq != want || e.At.IsZero() {
			t.Fatalf("event %d: %+v, want seq %d", i, e, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, _, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing queued: %v, want the context's error", err)
	}
	sub.Close()
	if _, _, err := sub.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}

	open := s.Subscribe()
	s.events.closeAll() // as Store.Close does
	if _, _, err := open.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after the store closed: %v", err)
	}
	if _, _, err := s.Subscribe().Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next of a stream subscribed after the store closed: %v", err)
	}
}
