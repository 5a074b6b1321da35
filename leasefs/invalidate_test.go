package leasefs

import (
	"path"
	"testing"
)

// TestTouchesNamesEveryChange makes real changes to a fixture store and
// compares the whole tree before and after each: every path that
// appeared, went or now names another node must be named by Touches (or
// lie below a named entry), and every cached node (not CacheNever) whose
// attributes changed must be named by one of its paths in Files. This is
// what lets an adapter cache for long and still never show a stale name
// or attribute.
func TestTouchesNamesEveryChange(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	steps := []struct {
		name string
		do   func() error
	}{
		{"create under generations/", func() error {
			d, n := fx.parent("generations/g000001/leases/n1")
			cr, err := fx.fs.Create(d, n, OpenFlags{Write: true, Exclusive: true}, owner)
			if err != nil {
				return err
			}
			return cr.Durable()
		}},
		{"create under keys/", func() error {
			d, n := fx.parent("keys/KEY/leases/n2")
			cr, err := fx.fs.Create(d, n, OpenFlags{Write: true, Exclusive: true}, owner)
			if err != nil {
				return err
			}
			return cr.Durable()
		}},
		{"tombstone by rename", func() error {
			return fx.fs.Rename(fx.walk("generations"), "g000003", fx.walk("tombstones"), "g000003", 0, owner)
		}},
		{"lift by rename", func() error {
			return fx.fs.Rename(fx.walk("tombstones"), "g000003", fx.walk("generations"), "g000003", 0, owner)
		}},
		{"tombstone with a lease", func() error {
			return fx.fs.Rename(fx.walk("generations"), "g000001", fx.walk("tombstones"), "g000001", 0, owner)
		}},
		{"cancel a lease", func() error { return fx.st.CancelLease("n1") }},
		{"retire with a lease", func() error { return fx.fs.Rmdir(fx.walk("tombstones"), "g000001", owner) }},
		{"retire without leases", func() error {
			if err := fx.fs.Rename(fx.walk("generations"), "g000003", fx.walk("tombstones"), "g000003", 0, owner); err != nil {
				return err
			}
			return fx.fs.Rmdir(fx.walk("tombstones"), "g000003", owner)
		}},
		{"cancel the last lease of a retiring generation", func() error { return fx.st.CancelLease("c1") }},
	}
	for _, s := range steps {
		before := fx.cachedTree()
		w := fx.fs.WatchChanges()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		touched, lost := w.Take()
		w.Close()
		if lost || len(touched) == 0 {
			t.Fatalf("%s: %d changes, lost %v", s.name, len(touched), lost)
		}
		after := fx.cachedTree()
		entries, files := map[string]bool{}, map[string]bool{}
		for _, tc := range touched {
			for _, e := range tc.Entries {
				entries[e.Path()] = true
			}
			for _, f := range tc.Files {
				files[f] = true
			}
		}
		named := func(p string) bool {
			for ; p != "."; p = path.Dir(p) {
				if entries[p] {
					return true
				}
			}
			return false
		}
		for p, b := range before {
			if a, ok := after[p]; (!ok || a.node != b.node) && !named(p) {
				t.Errorf("%s: %s left or changed (%v -> %v) and Touches names no entry for it", s.name, p, b.node, a.node)
			}
		}
		for p, a := range after {
			b, ok := before[p]
			switch {
			case !ok || b.node != a.node:
				if !named(p) {
					t.Errorf("%s: %s appeared (%v) and Touches names no entry for it", s.name, p, a.node)
				}
			case b.attr != a.attr && a.node.CachePolicy() != CacheNever && !fx.namesNode(files, after, a.node):
				t.Errorf("%s: attributes of %s (%v) changed and Touches names none of its paths", s.name, p, a.node)
			}
		}
	}
}

// cached is a node of the tree with its attributes.
type cached struct {
	node Node
	attr Attr
}

// cachedTree is walkTree with each node's attributes.
func (fx *fixture) cachedTree() map[string]cached {
	fx.t.Helper()
	out := map[string]cached{}
	for p, n := range fx.walkTree() {
		a, err := fx.fs.Attr(n)
		if err != nil {
			fx.t.Fatalf("Attr(%s): %v", p, err)
		}
		out[p] = cached{n, a}
	}
	return out
}

// namesNode reports whether one of files is a path of n in tree.
func (fx *fixture) namesNode(files map[string]bool, tree map[string]cached, n Node) bool {
	for p := range files {
		if c, ok := tree[p]; ok && c.node == n {
			return true
		}
	}
	return false
}

// TestCachePolicy holds the policy of every kind: immutable nodes are
// CacheForever, and those that change without a store event CacheNever.
func TestCachePolicy(t *testing.T) {
	never := map[Kind]bool{KindStoreFile: true, KindStatusFile: true, KindKeyGenerationsFile: true, KindIndexFile: true,
		KindIncomingDir: true, KindIncomingEntryDir: true, KindIncomingFile: true, KindIncomingCtlFile: true,
		KindIncomingStatusFile: true, KindEventsFile: true, KindMetricsFile: true}
	notified := map[Kind]bool{KindGenerationDir: true, KindLeaseFile: true, KindKeyDir: true, KindKeyLeasesDir: true}
	for _, k := range Kinds() {
		n := Node{kind: k}
		want := CacheForever
		switch {
		case never[k]:
			want = CacheNever
		case notified[k]:
			want = CacheNotified
		}
		if got := n.CachePolicy(); got != want {
			t.Errorf("%s: policy %d, want %d", k, got, want)
		}
		if want == CacheForever && !n.Immutable() {
			t.Errorf("%s: CacheForever but not Immutable", k)
		}
	}
}
