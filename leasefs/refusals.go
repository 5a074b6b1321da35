package leasefs

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"templatefs/internal/hostclock"
	"templatefs/store"
)

// maxRefusals bounds the generations whose last refusal is remembered;
// when full, the oldest refusal is forgotten first.
const maxRefusals = 4096

// refusal is the last refused mutation of one generation: what was asked,
// the errno it got and the error text, since an errno alone loses the
// reason (fuse-and-store-notes.md §C6, project issue 3).
type refusal struct {
	at     time.Time
	op     string // e.g. "rmdir g000002", "write ctl", "unlink c1"
	errno  Errno
	reason string // the error text on one line
}

// String renders the refusal as status shows it: time, op, errno, reason.
func (r refusal) String() string {
	return fmt.Sprintf("%s %s %s: %s", r.at.UTC().Format(time.RFC3339Nano), r.op, r.errno, r.reason)
}

// refusals keeps the last refusal per generation, in memory only: it does
// not survive a daemon restart (the refusal was logged, and the store's
// records say the state that matters).
type refusals struct {
	mu   sync.Mutex
	last map[store.GenerationID]refusal
}

// note remembers err as gen's last refusal; nil errors and gen 0 (no
// generation) are ignored.
func (r *refusals) note(gen store.GenerationID, op string, err error) {
	if err == nil || gen == 0 {
		return
	}
	e, _ := match(err)
	rf := refusal{at: hostclock.Now(), op: op, errno: e, reason: strings.ReplaceAll(err.Error(), "\n", " ")}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = make(map[store.GenerationID]refusal)
	}
	if _, ok := r.last[gen]; !ok && len(r.last) >= maxRefusals {
		var oldest store.GenerationID
		for g, x := range r.last {
			if oldest == 0 || x.at.Before(r.last[oldest].at) {
				oldest = g
			}
		}
		delete(r.last, oldest)
	}
	r.last[gen] = rf
}

// get returns gen's last refusal, if one is remembered.
func (r *refusals) get(gen store.GenerationID) (refusal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rf, ok := r.last[gen]
	return rf, ok
}
