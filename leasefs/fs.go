package leasefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"templatefs/store"
)

// DefaultKillWait is how long a `kill` write waits for the bound process
// to exit after SIGKILL before the lease is left in state teardown-failed
// (project issue 3: "a bounded wait"). A SIGKILLed process normally exits
// within milliseconds; one stuck in uninterruptible sleep (a hung NFS or
// FUSE request) may not exit at all.
const DefaultKillWait = 5 * time.Second

// Options tunes an FS. The zero value is ready to use.
type Options struct {
	// Logger receives refusal lines (FS.Refuse); nil means slog.Default().
	Logger *slog.Logger
	// KillWait bounds the wait of a `kill` write (store.KillLease); zero
	// means DefaultKillWait.
	KillWait time.Duration
	// StoreLines, if set, returns "key: value" lines appended to MNT/store
	// at each render: the daemon's fleet state (internal/fleet).
	StoreLines func() []string
	// Observer is told of every refusal, for metrics; nil means nobody.
	Observer Observer
	// Metrics renders the metrics file (MetricsFileName) at each open and
	// stat; nil means the tree has none.
	Metrics func() ([]byte, error)
}

// FS is the namespace over one open store. Its tree state is the store's:
// every call reads committed store state, so it is safe for concurrent use
// and never serves a stale listing. The one thing it keeps itself is each
// generation's last refusal (refusals.go), in memory only.
type FS struct {
	st         *store.Store
	log        *slog.Logger
	uid, gid   uint32
	owners     []uint32  // who may change the tree (authorize): the store owner and root unless SetOwners
	created    time.Time // store creation: the times of the fixed nodes
	killWait   time.Duration
	storeLines func() []string        // Options.StoreLines, or nil
	obs        Observer               // Options.Observer, or nil
	metrics    func() ([]byte, error) // renders MetricsFileName; nil: no such file
	refusals   refusals
	incoming   incoming // incoming directories' writers and outcomes (incoming.go)
	gate       gate     // closed by Detach (detach.go)
	// eventsCtx is done once EndEvents is called: every events reader
	// then ends (events.go).
	eventsCtx context.Context
	endEvents context.CancelFunc
}

// New returns the namespace of st. Files are owned by the store owner
// (store.OwnerUID) and the process's effective group. It returns the
// store's error if its identity cannot be read.
func New(st *store.Store, opts Options) (*FS, error) {
	created, err := st.CreatedAt() // not Info: it walks every record
	if err != nil {
		return nil, fmt.Errorf("leasefs: read store creation time: %w", err)
	}
	f := &FS{st: st, log: opts.Logger, uid: uint32(st.OwnerUID()), created: created, killWait: opts.KillWait, storeLines: opts.StoreLines,
		obs: opts.Observer, metrics: opts.Metrics}
	f.owners = []uint32{f.uid, 0}
	f.eventsCtx, f.endEvents = context.WithCancel(context.Background())
	if f.killWait <= 0 {
		f.killWait = DefaultKillWait
	}
	if gid := os.Getegid(); gid > 0 {
		f.gid = uint32(gid)
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	return f, nil
}

// Root returns the root directory node.
func (f *FS) Root() Node { return fixedNode(KindRoot) }

// DirEntry is one name of a directory listing.
type DirEntry struct {
	Name string
	Node Node
}

func notFound(dir Node, name string) error {
	return fmt.Errorf("%s has no entry %q: %w", dir, name, store.ErrNotFound)
}

// Lookup returns the child called name of directory dir. Errors:
// store.ErrNotFound (wrapped) when dir has no such child or dir itself no
// longer exists, ErrNotDir when dir is a file, ErrInoOverflow, or the
// store's error.
func (f *FS) Lookup(dir Node, name string) (Node, error) {
	if err := f.enter("lookup"); err != nil {
		return Node{}, err
	}
	defer f.leave()
	switch dir.kind {
	case KindRoot:
		if k, ok := fixedChild(KindRoot, name); ok && !f.absent(k) {
			return fixedNode(k), nil
		}
	case KindKeysDir:
		if store.ValidateKeyID(name) != nil {
			break
		}
		k, err := f.st.Key(name)
		if err != nil {
			return Node{}, err
		}
		return objectNode(KindKeyDir, k.Seq, k.ID)
	case KindKeyDir:
		if _, err := f.key(dir); err != nil {
			return Node{}, err
		}
		if k, ok := fixedChild(KindKeyDir, name); ok {
			return Node{kind: k, num: dir.num, name: dir.name}, nil
		}
	case KindGenerationsDir, KindTombstonesDir, KindRetiringDir:
		id, err := store.ParseGenerationID(name)
		if err != nil {
			break
		}
		g, err := f.st.Generation(id)
		if err != nil {
			return Node{}, err
		}
		if !listedIn(dir.kind, g.State) {
			return Node{}, fmt.Errorf("generation %s is %s, not under %s: %w", id, g.State, dir, store.ErrNotFound)
		}
		return genNode(KindGenerationDir, id)
	case KindGenerationDir:
		if _, err := f.st.Generation(dir.Generation()); err != nil {
			return Node{}, err
		}
		if k, ok := fixedChild(KindGenerationDir, name); ok {
			return genNode(k, dir.Generation())
		}
	case KindPayloadDir:
		g, err := f.st.Generation(dir.Generation())
		if err != nil {
			return Node{}, err
		}
		if _, ok := g.Artifact(name); ok {
			return payloadNode(g.ID, name)
		}
	case KindGenerationLeasesDir, KindLeasesDir, KindKeyLeasesDir:
		return f.lookupLease(dir, name)
	case KindIncomingDir:
		return f.lookupIncomingDir(name)
	case KindIncomingEntryDir:
		return f.lookupIncomingFile(dir, name)
	default:
		return Node{}, fmt.Errorf("lookup %q in %s: %w", name, dir, ErrNotDir)
	}
	return Node{}, notFound(dir, name)
}

// lookupLease resolves name in one of the three directories that list
// leases: every lease (leases/), a generation's, or a key's. A lease held
// on another generation or key is not found there.
func (f *FS) lookupLease(dir Node, name string) (Node, error) {
	switch dir.kind {
	case KindGenerationLeasesDir:
		if _, err := f.st.Generation(dir.Generation()); err != nil {
			return Node{}, err
		}
	case KindKeyLeasesDir:
		if _, err := f.key(dir); err != nil {
			return Node{}, err
		}
	}
	if store.ValidateCloneID(name) != nil {
		return Node{}, notFound(dir, name)
	}
	l, err := f.st.Lease(name)
	if err != nil {
		return Node{}, err
	}
	switch {
	case dir.kind == KindGenerationLeasesDir && l.Generation != dir.Generation():
		return Node{}, fmt.Errorf("lease %q is on generation %s, not %s: %w", name, l.Generation, dir.Generation(), store.ErrNotFound)
	case dir.kind == KindKeyLeasesDir && l.KeyID != dir.name:
		return Node{}, fmt.Errorf("lease %q is on key %s, not %s: %w", name, l.KeyID, dir.name, store.ErrNotFound)
	}
	return objectNode(KindLeaseFile, l.Seq, l.CloneID)
}

// listedIn reports whether a generation in state st is listed in dir
// (KindGenerationsDir, KindTombstonesDir or KindRetiringDir): each state
// has its own directory, so a generation is in exactly one. A retiring
// generation stays readable under retiring/ until its last lease is
// released.
func listedIn(dir Kind, st store.GenerationState) bool {
	return stateDir[st] == dir
}

// stateDir is the top-level directory listing generations in each state.
var stateDir = map[store.GenerationState]Kind{
	store.Published:  KindGenerationsDir,
	store.Tombstoned: KindTombstonesDir,
	store.Retiring:   KindRetiringDir,
}

// StateDirs returns the names of the root directories a generation moves
// between by its state (generations, tombstones, retiring), in listing
// order: after a ctl write an adapter asks each of them whether the
// generation is still there.
func StateDirs() []string {
	var out []string
	for _, e := range fixedEntries[KindRoot] {
		for _, dir := range stateDir {
			if e.kind == dir {
				out = append(out, e.name)
			}
		}
	}
	return out
}

func payloadNode(g store.GenerationID, name string) (Node, error) {
	if _, ok := artifactIndex(name); !ok {
		return Node{}, fmt.Errorf("generation %s artifact %q has no inode class (known: %s)", g, name, strings.Join(artifacts[:], ", "))
	}
	return objectNode(KindPayloadFile, uint64(g), name)
}

// ReadDir lists directory dir in a deterministic order: fixed entries in
// the order of the package doc (the root does not list EventsFileName), keys by key ID, generations by ID, leases
// by clone ID, payload files in publication order. A key's leases
// directory lists the leases on any generation of that key. Errors: ErrNotDir,
// store.ErrNotFound when dir no longer exists, or the store's error.
func (f *FS) ReadDir(dir Node) ([]DirEntry, error) {
	if err := f.enter("readdir"); err != nil {
		return nil, err
	}
	defer f.leave()
	var out []DirEntry
	add := func(name string, n Node, err error) error {
		if err == nil {
			out = append(out, DirEntry{Name: name, Node: n})
		}
		return err
	}
	switch dir.kind {
	case KindRoot:
		for _, e := range fixedEntries[KindRoot] {
			if !e.kind.facts().unlisted {
				add(e.name, fixedNode(e.kind), nil)
			}
		}
	case KindKeysDir:
		keys, err := f.st.Keys()
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if err := add(objectEntry(KindKeyDir, k.Seq, k.ID, k.ID)); err != nil {
				return nil, err
			}
		}
	case KindKeyDir:
		if _, err := f.key(dir); err != nil {
			return nil, err
		}
		for _, e := range fixedEntries[KindKeyDir] {
			add(e.name, Node{kind: e.kind, num: dir.num, name: dir.name}, nil)
		}
	case KindGenerationsDir, KindTombstonesDir, KindRetiringDir:
		gens, err := f.st.Generations()
		if err != nil {
			return nil, err
		}
		for _, g := range gens {
			if !listedIn(dir.kind, g.State) {
				continue
			}
			n, err := genNode(KindGenerationDir, g.ID)
			if err := add(g.ID.String(), n, err); err != nil {
				return nil, err
			}
		}
	case KindGenerationDir:
		if _, err := f.st.Generation(dir.Generation()); err != nil {
			return nil, err
		}
		for _, e := range fixedEntries[KindGenerationDir] {
			n, err := genNode(e.kind, dir.Generation())
			if err := add(e.name, n, err); err != nil {
				return nil, err
			}
		}
	case KindPayloadDir:
		g, err := f.st.Generation(dir.Generation())
		if err != nil {
			return nil, err
		}
		for _, a := range g.Artifacts {
			n, err := payloadNode(g.ID, a.Name)
			if err := add(a.Name, n, err); err != nil {
				return nil, err
			}
		}
	case KindGenerationLeasesDir:
		leases, err := f.st.GenerationLeases(dir.Generation())
		if err != nil {
			return nil, err
		}
		for _, l := range leases {
			if err := add(objectEntry(KindLeaseFile, l.Seq, l.CloneID, l.CloneID)); err != nil {
				return nil, err
			}
		}
	case KindLeasesDir, KindKeyLeasesDir:
		if dir.kind == KindKeyLeasesDir {
			if _, err := f.key(dir); err != nil {
				return nil, err
			}
		}
		leases, err := f.st.Leases()
		if err != nil {
			return nil, err
		}
		for _, l := range leases {
			if dir.kind == KindKeyLeasesDir && l.KeyID != dir.name {
				continue
			}
			if err := add(objectEntry(KindLeaseFile, l.Seq, l.CloneID, l.CloneID)); err != nil {
				return nil, err
			}
		}
	case KindIncomingDir, KindIncomingEntryDir:
		return f.readIncoming(dir)
	default:
		return nil, fmt.Errorf("readdir %s: %w", dir, ErrNotDir)
	}
	return out, nil
}

func objectEntry(k Kind, num uint64, id, name string) (string, Node, error) {
	n, err := objectNode(k, num, id)
	return name, n, err
}

// Walk resolves an io/fs path ("." is the root) by calling Lookup once per
// element, so a path resolves exactly as a kernel walking the same names
// would. Errors: fs.ErrInvalid (wrapped) for a path that is not
// fs.ValidPath, else the first Lookup error.
func (f *FS) Walk(name string) (Node, error) {
	if !fs.ValidPath(name) {
		return Node{}, fmt.Errorf("walk %q: %w", name, fs.ErrInvalid)
	}
	n := f.Root()
	if name == "." {
		return n, nil
	}
	for _, elem := range strings.Split(name, "/") {
		next, err := f.Lookup(n, elem)
		if err != nil {
			return Node{}, fmt.Errorf("walk %q: %w", name, err)
		}
		n = next
	}
	return n, nil
}

// key returns the record of a key node, or store.ErrNotFound if the key
// is gone or its sequence number changed.
func (f *FS) key(n Node) (store.KeyRecord, error) {
	k, err := f.st.Key(n.name)
	if err == nil && k.Seq != n.num {
		err = fmt.Errorf("key %s has seq %d, node has %d: %w", n.name, k.Seq, n.num, store.ErrNotFound)
	}
	return k, err
}

// lease returns the record of a lease file node, or store.ErrNotFound if
// the lease was released (a lease acquired again under the same clone ID
// is another node: its sequence number differs).
func (f *FS) lease(n Node) (store.Lease, error) {
	l, err := f.st.Lease(n.name)
	if err == nil && l.Seq != n.num {
		err = fmt.Errorf("lease %q has seq %d, node has %d (released and acquired again): %w", n.name, l.Seq, n.num, store.ErrNotFound)
	}
	return l, err
}

// isNotFound reports whether err means "no such name".
func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
