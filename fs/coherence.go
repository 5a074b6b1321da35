//go:build linux

package fs

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"templatefs/leasefs"
)

// Coherence keeps the kernel's caches of a mount true: the kernel caches
// names and attributes for long (CacheTimeout), and Coherence tells it of
// every store change as the change is made (leasefs.Touches maps each to
// the paths it touches): NotifyEntry for a name that left or now names
// another node (go-fuse's link is dropped first, so the next lookup makes
// a new inode, see incarnation), NotifyContent for a file or directory
// whose attributes changed. The daemon is the store's only writer, so
// these are all the changes there are:
//
//   - through the mount: each handler that may change the store runs in
//     an op (begin/end) and tells the kernel of every change emitted
//     meanwhile before it replies, so another process's next look sees it;
//   - through the CLI channel: Do runs the command the same way, before
//     the client gets its reply;
//   - made by the daemon itself (an exit recorded, a retirement finished):
//     a watcher goroutine tells the kernel as each event is emitted.
//
// Deadlocks. The kernel holds a directory's lock (i_rwsem, exclusively)
// across a CREATE, UNLINK, RMDIR, MKDIR or RENAME in it, and a
// NotifyEntry on a directory takes that lock: a notification about the
// directory the request itself holds would wait forever, and two requests
// each notifying about the directory the other holds would wait for each
// other. So every handler registers the directories it holds (held) on
// entry, and a notification about a directory some request holds is sent
// from a goroutine of its own that nobody waits for (the kernel delivers
// it when the holder replies); a request's own directory needs none, the
// kernel updates it itself. A request waits only for notifications about
// directories not registered when it checked; a holder registered later
// checks after registering and so never waits back: no cycle. Nothing in
// the daemon is locked while a notification is sent. NotifyContent takes
// no directory or inode lock and is always sent in line.
//
// Replies that make a new kernel inode. The kernel drops the attributes
// of a GETATTR or LOOKUP reply about an inode it already has when a
// notification about that inode came meanwhile (attr_version), but a
// notification about an inode it does not have yet is lost: a LOOKUP that
// read the store before a change and whose reply the kernel installs
// after the change's notification would cache the old node for long. So a
// LOOKUP during which a change was emitted answers with zero timeouts
// (quiet), and the watcher tells the kernel of each change a second time
// after repeatDelay, once any reply that raced with it is installed.
//
// The zero Coherence is ready to use; Mount attaches it to its mount.
type Coherence struct {
	// root is the mount's root inode, nil until mounted.
	root atomic.Pointer[fusefs.Inode]
	lfs  *leasefs.FS

	mu   sync.Mutex
	held map[*fusefs.Inode]int
}

// attach starts serving mount root of lfs: from now on changes reach the
// kernel. The watcher runs until ctx ends.
func (c *Coherence) attach(ctx context.Context, lfs *leasefs.FS, root *fusefs.Inode) {
	c.lfs = lfs
	w := lfs.WatchChanges()
	c.root.Store(root)
	go c.watch(ctx, w)
}

// watch tells the kernel of every change as it is emitted: those the
// daemon makes itself, and again those an op already told (harmless).
func (c *Coherence) watch(ctx context.Context, w *leasefs.Changes) {
	defer w.Close()
	for w.Wait(ctx) == nil {
		ts, lost := w.Take()
		c.apply(ts, lost, nil)
		time.AfterFunc(repeatDelay, func() { c.apply(ts, false, nil) })
	}
}

// repeatDelay is how long after a change the watcher tells the kernel of
// it again (see Coherence: replies that make a new kernel inode).
const repeatDelay = 100 * time.Millisecond

// quiet starts a quietWatch: whether no change is emitted from now on.
func (c *Coherence) quiet() *quietWatch {
	if c == nil || c.root.Load() == nil {
		return nil // nothing is cached before the mount is attached
	}
	return &quietWatch{w: c.lfs.WatchChanges()}
}

// quietWatch tells whether a store change was emitted since it began. The
// nil quietWatch is always quiet.
type quietWatch struct {
	w       *leasefs.Changes
	changed bool
}

// quiet reports whether no change was emitted since q began.
func (q *quietWatch) quiet() bool {
	if q == nil {
		return true
	}
	if !q.changed {
		ts, lost := q.w.Take()
		q.changed = len(ts) > 0 || lost
	}
	return !q.changed
}

// close ends the watch and reports quiet.
func (q *quietWatch) close() bool {
	if q == nil {
		return true
	}
	defer q.w.Close()
	return q.quiet()
}

// Do runs a change made outside the mount (a command of the CLI channel)
// and, before returning its error, tells the kernel of every store change
// made meanwhile. Safe for concurrent use; before the mount is attached it
// just runs.
func (c *Coherence) Do(run func() error) error {
	o := c.begin()
	defer o.end()
	return run()
}

// op is one change in progress: the directories its request holds and a
// watch of the changes made from its start.
type op struct {
	c    *Coherence
	held []*fusefs.Inode
	w    *leasefs.Changes
}

// begin starts an op whose request holds the directories held.
func (c *Coherence) begin(held ...*fusefs.Inode) *op {
	if c == nil || c.root.Load() == nil {
		return nil
	}
	c.mu.Lock()
	if c.held == nil {
		c.held = map[*fusefs.Inode]int{}
	}
	for _, d := range held {
		c.held[d]++
	}
	c.mu.Unlock()
	return &op{c: c, held: held, w: c.lfs.WatchChanges()}
}

// end tells the kernel of the op's changes (and any made meanwhile), and
// that the attributes of the nodes in changed may have changed (a lease
// the request wrote to or removed: its state moves through releasing or
// teardown-failed without an event), then unregisters its directories. A
// nil op does nothing.
func (o *op) end(changed ...*fusefs.Inode) {
	if o == nil {
		return
	}
	o.c.tell(o.w, o.held)
	for _, in := range changed {
		if in != nil {
			in.NotifyContent(-1, 0)
		}
	}
	o.w.Close()
	o.c.mu.Lock()
	for _, d := range o.held {
		if o.c.held[d]--; o.c.held[d] == 0 {
			delete(o.c.held, d)
		}
	}
	o.c.mu.Unlock()
}

// tell takes the changes w holds and tells the kernel of them; self are
// the directories the calling request holds. If w lost changes (it fell
// store.EventBuffer behind), every cached name is checked.
func (c *Coherence) tell(w *leasefs.Changes, self []*fusefs.Inode) {
	ts, lost := w.Take()
	c.apply(ts, lost, self)
}

// apply tells the kernel of the changes ts (all of them if lost).
func (c *Coherence) apply(ts []leasefs.Touched, lost bool, self []*fusefs.Inode) {
	if c.lfs.Detached() {
		return
	}
	root := c.root.Load()
	if lost {
		c.sweep(root, self)
	}
	contents := map[*fusefs.Inode]bool{}
	for _, t := range ts {
		for _, e := range t.Entries {
			if dir := walk(root, e.Dir); dir != nil {
				c.entry(dir, e.Name, self)
			}
		}
		for _, p := range t.Files {
			if in := walk(root, p); in != nil && in.Operations().(*node).ln.CachePolicy() != leasefs.CacheNever {
				contents[in] = true
			}
		}
	}
	for in := range contents {
		in.NotifyContent(-1, 0) // attributes: every cached file is served with direct I/O
	}
}

// entry drops dir's cached entry name unless it still names the node the
// kernel has for it (go-fuse's link mirrors the kernel's dentry).
func (c *Coherence) entry(dir *fusefs.Inode, name string, self []*fusefs.Inode) {
	child := dir.GetChild(name)
	if child == nil {
		return // the kernel holds no dentry for it (and caches no absent one here)
	}
	now, err := c.lfs.Lookup(dir.Operations().(*node).ln, name)
	if err == nil && now.Ino() == child.Operations().(*node).ln.Ino() {
		return
	}
	for _, d := range self {
		if d == dir {
			return // the kernel updates the dentry of the request's own change
		}
	}
	dir.RmChild(name) // first: a lookup from now on makes a new inode (incarnation)
	c.mu.Lock()
	busy := c.held[dir] > 0
	c.mu.Unlock()
	if busy {
		go dir.NotifyEntry(name) // delivered once its holder replies; see Coherence
		return
	}
	dir.NotifyEntry(name)
}

// sweep checks every cached name of a directory with CacheNotified
// entries, and invalidates every CacheNotified node's attributes: after
// lost events anything may be stale.
func (c *Coherence) sweep(dir *fusefs.Inode, self []*fusefs.Inode) {
	for name, child := range dir.Children() {
		if child.Operations().(*node).ln.CachePolicy() == leasefs.CacheNotified {
			c.entry(dir, name, self)
			child.NotifyContent(-1, 0)
		}
		if child.IsDir() {
			c.sweep(child, self)
		}
	}
}

// walk returns the inode go-fuse has at path p below root, nil if the
// kernel holds none there.
func walk(root *fusefs.Inode, p string) *fusefs.Inode {
	in := root
	if p == "" {
		return in
	}
	for _, name := range strings.Split(p, "/") {
		if in = in.GetChild(name); in == nil {
			return nil
		}
	}
	return in
}
