package leasefs

import (
	"context"
	"path"
	"sync"

	"templatefs/store"
)

// CachePolicy returns n's cache policy (the node table's): CacheForever
// for immutable nodes; CacheNotified for generation directories, lease
// files and key directories (their names appear at publication and lease
// creation and leave at a state change or release; lease files change at
// bind and exit); CacheNever for the store and status files (read_only,
// the restore window, last_refusal), keys/<key-id>/generations (a
// retirement that finishes does not name the key), the index snapshot,
// the events stream and everything below incoming/.
func (n Node) CachePolicy() CachePolicy { return n.kind.Cache() }

// NegativeCacheable reports whether a name dir lacks may be cached as
// absent: true where the names are fixed (the root, a key directory, a
// generation directory, a payload directory), false where names come
// and go with the store's changes.
func (n Node) NegativeCacheable() bool { return n.kind.facts().negative }

// Entry is one directory entry a store change may have made stale: the
// name Name in the directory at path Dir below the mount root ("" is the
// root, elements separated by "/").
type Entry struct {
	Dir, Name string
}

// Path is the entry's own path below the mount root.
func (e Entry) Path() string { return path.Join(e.Dir, e.Name) }

// Touched is what one store change may have made stale in a kernel's
// caches, by path below the mount root: Entries whose name appeared,
// disappeared or now names another node, and Files whose attributes or
// content changed (any one name of a node stands for the node). A path
// that names nothing, or nothing the kernel holds, needs nothing. It lists
// every name under each state directory (generations/, tombstones/,
// retiring/) a generation could have been under, since the change may
// have moved it: an adapter checks each against the tree as it is now.
type Touched struct {
	Entries []Entry
	Files   []string
}

// stateDirNames are the top-level directories a generation moves between.
var stateDirNames = [...]string{"generations", "tombstones", "retiring"}

// Touches maps one store change to the tree paths it touches. It is the
// one place that knows which names and files each event changes, for
// every adapter (go-fuse and cgofuse), so a kernel that caches
// CacheNotified nodes for long is told of each change:
//
//   - lease-created, lease-settled, lease-cancelled: the lease's three
//     names (leases/, keys/<key-id>/leases/, <state>/<gen>/leases/);
//     lease-bound, lease-exited: the lease file (its JSON);
//   - published, tombstoned, lifted, retirement-started,
//     retirement-finished: the generation's name in each state directory
//     and the directory itself (its ctime is the tombstone time); published
//     also keys/<key-id>;
//   - every event: the store file and the generation's status, whose
//     counts and state follow it (both CacheNever, listed for adapters
//     that cache them briefly); settings: the store file (every status
//     file changes too, and none is cached).
func Touches(e store.Event) Touched {
	var t Touched
	t.Files = append(t.Files, "store")
	gen := ""
	if e.Generation != 0 {
		gen = e.Generation.String()
		for _, s := range stateDirNames {
			t.Files = append(t.Files, path.Join(s, gen, "status"))
		}
	}
	switch e.Kind {
	case store.EventLeaseCreated, store.EventLeaseSettled, store.EventLeaseCancelled:
		t.Entries = append(t.Entries, leaseEntries(e, gen)...)
		for _, n := range leaseEntries(e, gen) {
			t.Files = append(t.Files, n.Path())
		}
	case store.EventLeaseBound, store.EventLeaseExited:
		for _, n := range leaseEntries(e, gen) {
			t.Files = append(t.Files, n.Path())
		}
	case store.EventPublished, store.EventTombstoned, store.EventLifted, store.EventRetirementStarted, store.EventRetirementFinished:
		for _, s := range stateDirNames {
			t.Entries = append(t.Entries, Entry{s, gen})
			t.Files = append(t.Files, path.Join(s, gen))
		}
		if e.Kind == store.EventPublished && e.KeyID != "" {
			t.Entries = append(t.Entries, Entry{"keys", e.KeyID})
		}
	}
	return t
}

// leaseEntries are the names a lease of event e can have.
func leaseEntries(e store.Event, gen string) []Entry {
	names := []Entry{{"leases", e.CloneID}}
	if e.KeyID != "" {
		names = append(names, Entry{path.Join("keys", e.KeyID, "leases"), e.CloneID})
	}
	if gen != "" {
		for _, s := range stateDirNames {
			names = append(names, Entry{path.Join(s, gen, "leases"), e.CloneID})
		}
	}
	return names
}

// Changes is a watch of the store's changes from the moment it began
// (FS.WatchChanges), as the paths each touches. Each change is there once
// it is durable, before the call that made it returns, so a watch begun
// before a call and taken after it holds that call's changes. Safe for
// concurrent use; Close it when done.
type Changes struct {
	sub *store.EventStream
	// What Wait took and no Take has returned yet.
	mu      sync.Mutex
	pending []store.Event
	missed  uint64
}

// WatchChanges begins a watch of every change from now on. It takes no
// part in Detach: a watch of a detached FS just sees nothing more.
func (f *FS) WatchChanges() *Changes { return &Changes{sub: f.st.Subscribe()} }

// closedCtx is an ended context: Take asks the stream without waiting.
var closedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Take returns what the changes since the last Take touch, without
// waiting (none: nil); lost is set when changes were dropped because the
// watch fell store.EventBuffer behind: then anything may be stale.
func (c *Changes) Take() (touched []Touched, lost bool) {
	evs, missed, _ := c.sub.Next(closedCtx)
	c.mu.Lock()
	evs, missed = append(c.pending, evs...), missed+c.missed
	c.pending, c.missed = nil, 0
	c.mu.Unlock()
	for _, e := range evs {
		touched = append(touched, Touches(e))
	}
	return touched, missed > 0
}

// Wait blocks until there is something to Take. Errors: ctx's error, or
// store.ErrClosed once the store is closed or the watch is.
func (c *Changes) Wait(ctx context.Context) error {
	evs, missed, err := c.sub.Next(ctx)
	c.mu.Lock()
	c.pending, c.missed = append(c.pending, evs...), c.missed+missed
	c.mu.Unlock()
	return err
}

// Close ends the watch.
func (c *Changes) Close() { c.sub.Close() }
