package leasefs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"templatefs/store"
)

// EventsFileName is the root file that streams the store's state changes
// (project issue 9, §5): each open reads, as JSON lines, every event the
// store emits from the moment of the open (store.Store.Subscribe). Its
// reads block, so the root does not list it: tools that walk the tree
// (find, cp -a, tar, rsync, restic) never open it, and a backup of the
// mount never hangs on it. Lookup finds it by name.
const EventsFileName = "events"

// Events is one open of the events file: its own subscription to the
// store's events, read as one JSON line per event (store.Event: seq, at,
// event and the fields that apply). A reader that falls more than
// store.EventBuffer events behind loses the oldest; its next read starts
// with one line {"event":"missed","missed":N} counting them. Read blocks
// until there is something to return. It is safe for concurrent use: reads
// take turns, so no line is split between two readers.
type Events struct {
	sub   *store.EventStream
	ended context.Context // done after FS.EndEvents
	turn  chan struct{}   // holds a token while a Read runs
	// What the last Next returned and no read has taken yet: missed is
	// reported first, then queue in order; rest is the tail of a line a
	// short read cut.
	queue  []store.Event
	missed uint64
	rest   []byte
}

// missedLine is the line that reports dropped events.
type missedLine struct {
	Kind   string `json:"event"`
	Missed uint64 `json:"missed"`
}

// openEvents subscribes a new reader to the store's events.
func (f *FS) openEvents() *Events {
	return &Events{sub: f.st.Subscribe(), ended: f.eventsCtx, turn: make(chan struct{}, 1)}
}

// EndEvents ends every open of the events file, and those made later:
// their reads return io.EOF once they have returned what was already
// taken from the store. The daemon calls it when it starts to unmount, so
// a reader blocked in `cat MNT/events` lets the mount go (and the
// daemon exit). Closing the store ends them too.
func (f *FS) EndEvents() { f.endEvents() }

// Read fills p with whole lines, as many as fit (a line longer than p is
// cut, and its tail comes first in the next read), waiting until at least
// one event is there. Offsets have no meaning: the stream is read in
// order. Errors: io.EOF when the events ended (FS.EndEvents, the store
// closed, or Close); ctx's error (context.Canceled: EINTR) when ctx ends
// first, as when the reader is interrupted by a signal.
func (e *Events) Read(ctx context.Context, p []byte) (int, error) {
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-e.turn }()
	if len(p) == 0 {
		return 0, nil
	}
	if len(e.rest) == 0 && len(e.queue) == 0 && e.missed == 0 {
		if err := e.wait(ctx); err != nil {
			return 0, err
		}
	}
	n := 0
	for {
		c := copy(p[n:], e.rest)
		e.rest, n = e.rest[c:], n+c
		if len(e.rest) > 0 || n == len(p) {
			return n, nil
		}
		line, err := e.next()
		switch {
		case err != nil:
			return n, err
		case line == nil:
			return n, nil
		case n > 0 && len(line) > len(p)-n:
			e.rest = line // whole lines only, unless the first does not fit
			return n, nil
		}
		e.rest = line
	}
}

// wait blocks for the next batch of events.
func (e *Events) wait(ctx context.Context) error {
	if e.ended.Err() != nil {
		return io.EOF // even if more came: the stream ended
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.ended, cancel)()
	evs, missed, err := e.sub.Next(ctx)
	switch {
	case errors.Is(err, store.ErrClosed), e.ended.Err() != nil:
		return io.EOF
	case err != nil:
		return err
	}
	e.queue, e.missed = evs, missed
	return nil
}

// next renders the next line that wait took, or returns nil.
func (e *Events) next() ([]byte, error) {
	var v any
	switch {
	case e.missed > 0:
		v = missedLine{Kind: "missed", Missed: e.missed}
		e.missed = 0
	case len(e.queue) > 0:
		v = e.queue[0]
		e.queue = e.queue[1:]
	default:
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return append(b, '\n'), nil
}

// Close ends the subscription; the adapter calls it at release.
func (e *Events) Close() { e.sub.Close() }
