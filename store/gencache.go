package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// decodedGenerations keeps generation records decoded, keyed by their
// encoded bytes: every lookup through the mount reads the generation, and
// decoding its JSON was a quarter of the daemon's CPU time per lease
// create (docs/performance.md). A record changes only by being rewritten,
// which changes its bytes, so a hit is always current; keying by content
// also makes the cache safe to share between stores in one process.
var decodedGenerations = genCache{m: make(map[string]Generation)}

// genCacheSize bounds the cache; when full it is emptied, so it never
// holds more than this many records (about 1 KiB each).
const genCacheSize = 4096

type genCache struct {
	mu sync.Mutex
	m  map[string]Generation
}

// decode returns the generation encoded in raw (the bytes of a bbolt row,
// valid only in its transaction). Callers get their own copy of the
// record's slices and pointers, so they may change it. Errors: raw is not
// a generation record.
func (c *genCache) decode(key, raw []byte) (Generation, error) {
	c.mu.Lock()
	g, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return g.clone(), nil
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return Generation{}, fmt.Errorf("decode index record %q: %w", key, err)
	}
	c.mu.Lock()
	if len(c.m) >= genCacheSize {
		clear(c.m)
	}
	c.m[string(raw)] = g.clone()
	c.mu.Unlock()
	return g, nil
}

// clone copies what g shares by reference.
func (g Generation) clone() Generation {
	g.Artifacts = slices.Clone(g.Artifacts)
	if g.Tombstone != nil {
		t := *g.Tombstone
		g.Tombstone = &t
	}
	if g.Retirement != nil {
		r := *g.Retirement
		g.Retirement = &r
	}
	return g
}
