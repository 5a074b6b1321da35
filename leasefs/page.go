package leasefs

import (
	"fmt"

	"templatefs/store"
)

// ReadDirFrom lists up to n entries of dir that follow the entry named
// after ("" starts at the beginning), in ReadDir's order. Directories of
// generations and leases are read a page at a time from store cursors
// (store.GenerationsAfter, store.LeasesAfter, store.GenerationLeasesAfter),
// so listing 1,000,000 leases never holds more than a page; the other
// directories are small and listed whole. An entry removed between calls
// is skipped, none is returned twice. It returns fewer than n entries only
// at the end. Errors: as ReadDir, and ErrNotFound (wrapped) for a
// generation directory's after that is not a generation ID.
func (f *FS) ReadDirFrom(dir Node, after string, n int) ([]DirEntry, error) {
	plus, err := f.ReadDirPlusFrom(dir, after, n)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(plus))
	for i, e := range plus {
		out[i] = e.DirEntry
	}
	return out, nil
}

// DirEntryPlus is a listed entry with, for a lease file, its attributes
// as the page read them (nil for other nodes: ask Attr).
type DirEntryPlus struct {
	DirEntry
	Attr *Attr
}

// ReadDirPlusFrom is ReadDirFrom with the attributes of each listed
// lease file, taken from the same store read as the page: an adapter
// answering READDIRPLUS needs no Lookup or Attr of its own per lease,
// which would read the lease twice more. Errors: as ReadDirFrom.
func (f *FS) ReadDirPlusFrom(dir Node, after string, n int) ([]DirEntryPlus, error) {
	if err := f.enter("readdir"); err != nil {
		return nil, err
	}
	defer f.leave()
	if n <= 0 {
		return nil, fmt.Errorf("readdir %s: page size %d, want > 0", dir, n)
	}
	switch dir.kind {
	case KindGenerationsDir, KindTombstonesDir, KindRetiringDir:
		return plain(f.generationsFrom(dir, after, n))
	case KindGenerationLeasesDir:
		return f.leasesFrom(n, func(after string, n int) ([]store.Lease, error) {
			return f.st.GenerationLeasesAfter(dir.Generation(), after, n)
		}, after, nil)
	case KindLeasesDir:
		return f.leasesFrom(n, f.st.LeasesAfter, after, nil)
	case KindKeyLeasesDir:
		if _, err := f.key(dir); err != nil {
			return nil, err
		}
		return f.leasesFrom(n, f.st.LeasesAfter, after, func(l store.Lease) bool { return l.KeyID == dir.name })
	}
	all, err := f.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	start := 0
	if after != "" {
		start = len(all)
		for i, e := range all {
			// Fixed entries are found by name; keys are sorted by ID,
			// so a key gone since the last page ends at the next one.
			if e.Name == after || dir.kind == KindKeysDir && e.Name > after {
				start = i
				if e.Name == after {
					start++
				}
				break
			}
		}
	}
	return plain(all[start:min(len(all), start+n)], nil)
}

// plain returns entries without attributes, or err.
func plain(entries []DirEntry, err error) ([]DirEntryPlus, error) {
	if err != nil {
		return nil, err
	}
	out := make([]DirEntryPlus, len(entries))
	for i, e := range entries {
		out[i] = DirEntryPlus{DirEntry: e}
	}
	return out, nil
}

func (f *FS) generationsFrom(dir Node, after string, n int) ([]DirEntry, error) {
	var from store.GenerationID
	if after != "" {
		id, err := store.ParseGenerationID(after)
		if err != nil {
			return nil, fmt.Errorf("readdir %s after %q: %w", dir, after, store.ErrNotFound)
		}
		from = id
	}
	var out []DirEntry
	for len(out) < n {
		gens, err := f.st.GenerationsAfter(from, n)
		if err != nil {
			return nil, err
		}
		for _, g := range gens {
			if !listedIn(dir.kind, g.State) || len(out) == n {
				continue
			}
			node, err := genNode(KindGenerationDir, g.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, DirEntry{Name: g.ID.String(), Node: node})
		}
		if len(gens) < n {
			break
		}
		from = gens[len(gens)-1].ID
		if len(out) == n {
			break
		}
	}
	return out, nil
}

// leasesFrom pages through page (a store cursor read) from after until n
// leases that keep accepts (nil: all) are found or the leases end, each
// with its attributes.
func (f *FS) leasesFrom(n int, page func(after string, n int) ([]store.Lease, error), after string, keep func(store.Lease) bool) ([]DirEntryPlus, error) {
	var out []DirEntryPlus
	for len(out) < n {
		leases, err := page(after, n)
		if err != nil {
			return nil, err
		}
		for _, l := range leases {
			if keep != nil && !keep(l) {
				continue
			}
			node, err := objectNode(KindLeaseFile, l.Seq, l.CloneID)
			if err != nil {
				return nil, err
			}
			a, _, err := f.leaseAttr(node, l)
			if err != nil {
				return nil, err
			}
			out = append(out, DirEntryPlus{DirEntry{Name: l.CloneID, Node: node}, &a})
			if len(out) == n {
				return out, nil
			}
		}
		if len(leases) < n {
			break
		}
		after = leases[len(leases)-1].CloneID
	}
	return out, nil
}
