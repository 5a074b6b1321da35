package leasefs

import (
	"fmt"
	"io/fs"

	"templatefs/store"
	"templatefs/store/manifest"
)

// Kind is the kind of a node in the tree (see the package doc drawing).
// Every fact about a kind is its row in kinds; the constants are declared
// in the order a directory lists its fixed entries.
type Kind uint8

// Node kinds. Each has one inode class (see Node.Ino).
const (
	KindRoot                Kind = iota + 1 // /
	KindStoreFile                           // store
	KindIndexFile                           // store.db
	KindKeysDir                             // keys/
	KindKeyDir                              // keys/<key-id>/
	KindKeyFile                             // keys/<key-id>/key
	KindKeyGenerationsFile                  // keys/<key-id>/generations
	KindKeyLeasesDir                        // keys/<key-id>/leases/
	KindGenerationsDir                      // generations/
	KindLeasesDir                           // leases/
	KindTombstonesDir                       // tombstones/
	KindRetiringDir                         // retiring/
	KindGenerationDir                       // generations/<gen>/, tombstones/<gen>/ or retiring/<gen>/
	KindManifestFile                        // <gen>/manifest
	KindStatusFile                          // <gen>/status
	KindCtlFile                             // <gen>/ctl
	KindSumsFile                            // <gen>/SHA256SUMS
	KindPayloadDir                          // <gen>/payload/
	KindPayloadFile                         // <gen>/payload/<artifact>
	KindGenerationLeasesDir                 // <gen>/leases/
	KindLeaseFile                           // <gen>/leases/<clone-id>, leases/<clone-id>, keys/<key-id>/leases/<clone-id>
	KindIncomingDir                         // incoming/
	KindIncomingEntryDir                    // incoming/<name>/
	KindIncomingCtlFile                     // incoming/<name>/ctl
	KindIncomingStatusFile                  // incoming/<name>/status
	KindIncomingFile                        // incoming/<name>/<file>
	KindEventsFile                          // events
	KindMetricsFile                         // metrics
)

// CachePolicy says how long an adapter may let the kernel cache a node's
// name (its directory entry), attributes and content.
type CachePolicy uint8

const (
	// CacheForever: the node never changes while it exists, and its name
	// never leaves its parent while its generation or key exists; for
	// files also their content (a ctl file always reads the same; writes
	// to it change other nodes). A directory's listing is not covered.
	// Cache for long.
	CacheForever CachePolicy = iota + 1
	// CacheNotified: the node's name, attributes or content change only
	// by a store change that emits an event (store.Event), and Touches
	// names everything each event changes. Cache for long and invalidate
	// what Touches names as each event is emitted.
	CacheNotified
	// CacheNever: the node changes without an event (the clock: a restore
	// window that closes; a refusal kept in the daemon's memory; every
	// commit; a read-only store; a backing file on disk). Never cache.
	CacheNever
)

var cacheNames = [...]string{CacheForever: "forever", CacheNotified: "notified", CacheNever: "never"}

// String names the policy, e.g. "forever".
func (c CachePolicy) String() string { return nameOf(cacheNames[:], "cache", uint8(c)) }

// nameOf returns names[i], or what(i) for a value without a name.
func nameOf(names []string, what string, i uint8) string {
	if int(i) < len(names) && names[i] != "" {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", what, i)
}

// Content is how a node kind's content is served (the Handle field an
// open sets).
type Content uint8

const (
	ContentListing  Content = iota + 1 // a directory: ReadDir
	ContentText                        // rendered at open (Handle.Data), read-only
	ContentCommands                    // rendered at open; an open for writing takes commands (Handle.Commands)
	ContentPayload                     // the payload's backing file (Handle.File), read-only
	ContentSnapshot                    // a snapshot of the index per open (Handle.Snapshot)
	ContentStream                      // a stream of events per open (Handle.Events)
	ContentBacking                     // the backing file, read-write (Handle.Incoming)
)

var contentNames = [...]string{
	ContentListing:  "listing",
	ContentText:     "text",
	ContentCommands: "text + commands",
	ContentPayload:  "backing file, read-only",
	ContentSnapshot: "index snapshot per open",
	ContentStream:   "event stream per open",
	ContentBacking:  "backing file",
}

// String names the content, e.g. "text".
func (c Content) String() string { return nameOf(contentNames[:], "content", uint8(c)) }

// object is what a node's number and name hold.
type object uint8

const (
	objFixed        object = iota // one node of its kind: num 0, a fixed inode number
	objKey                        // num KeyRecord.Seq, name the key ID
	objGeneration                 // num the GenerationID
	objPayload                    // num the GenerationID, name the artifact
	objLease                      // num Lease.Seq, name the clone ID
	objIncomingDir                // num the backing directory's inode number, name the directory's
	objIncomingFile               // num the backing file's inode number, name "<dir>/<file>"
)

var objectNumbers = [...]string{
	objFixed:        "fixed",
	objKey:          "`KeyRecord.Seq`",
	objGeneration:   "generation ID",
	objPayload:      "generation ID",
	objLease:        "`Lease.Seq` (a released and re-acquired clone ID gets a new number)",
	objIncomingDir:  "the backing directory's inode number",
	objIncomingFile: "the backing file's inode number (kept by `mv` within the directory)",
}

// kindFacts is everything about one node kind: one row of kinds.
type kindFacts struct {
	name   string // Kind.String
	parent Kind   // the directory holding it (for a generation, KindGenerationsDir: also under the other state directories)
	// entry is the fixed name under parent; "" for nodes named by their
	// object (key ID, generation ID, artifact, clone ID, incoming name).
	entry string
	// unlisted: found by name, never listed (events: tools walking the
	// mount must not open a file whose reads never end).
	unlisted bool
	ino      uint64 // the inode number of an objFixed kind
	class    uint64 // the inode class of the others (payload files add their artifact index)
	object   object
	mode     fs.FileMode // fs.ModeDir for directories, plus permission bits
	nlink    uint32
	cache    CachePolicy
	// negative: a name the directory lacks may be cached as absent (its
	// names are fixed).
	negative bool
	content  Content
	// touch: a setattr of times is a no-op (touch works), and for
	// ContentCommands files also of size (`echo ... > file` truncates);
	// any other attribute change is ErrNotPermitted, not ErrReadOnly.
	touch bool
	// render reads what the node shows now: its text (rendered files) and
	// times. Nil: no text, the store's creation time.
	render func(f *FS, n Node) (view, error)
	// stat, if set, gives the whole attributes instead (a backing file's
	// size and blocks), starting from the defaults in a.
	stat func(f *FS, n Node, a Attr) (Attr, error)
	// shows says what it is, for docs/tree.md; times what its mtime and
	// ctime are.
	shows, times string
}

// The modes of the tree: directories are read-only except the leases
// directories (create acquires, unlink releases) and incoming ones; lease
// and ctl files take writes (commands); everything else is 0444. Every
// node is readable by all: with allow_other other users may read
// (project issue 3). The modes are informative: the mount has no
// default_permissions, and leasefs itself decides who may change what
// (Caller, ErrAccess).
const (
	modeDir       = fs.ModeDir | 0o555
	modeLeasesDir = fs.ModeDir | 0o755
	modeText      = 0o444
	modeCommands  = 0o644
)

// leaseNames is a lease file's link count: its names under its
// generation's leases/, under leases/ and under its key's leases/.
const leaseNames = 3

const (
	createdTimes = "store creation"
	publication  = "publication"
	keyCreated   = "key first published"
	dirTimes     = "the backing directory's mtime"
)

// kinds is the node table: one row per Kind. A new node kind is one row
// here (and its Kind constant); Lookup, ReadDir, Attr, Open, Ino, the
// adapters' cache timeouts and docs/tree.md all read it. It is set by
// init, since its renders read it too.
var kinds []kindFacts

func init() {
	kinds = []kindFacts{
		KindRoot: {name: "root", ino: InoRoot, mode: modeDir, nlink: 2 + 6, cache: CacheForever, negative: true, content: ContentListing,
			shows: "the mount", times: createdTimes},
		KindStoreFile: {name: "store file", parent: KindRoot, entry: "store", ino: InoStore, mode: modeText, nlink: 1, cache: CacheNever, content: ContentText,
			render: (*FS).storeView, shows: "store ID, schema identity and version, counts, settings, read-only state",
			times: "last change to what it shows: store creation, a generation's publication, state change (the record's `state_changed_at`) or lease grant or release (the sequence of its `generation_leases` bucket), deletion of a retired generation (the key's `generation_removed_at`), a settings change (`meta/settings_changed`)"},
		KindIndexFile: {name: "index snapshot file", parent: KindRoot, entry: IndexFileName, ino: InoIndex, mode: modeText, nlink: 1, cache: CacheNever, content: ContentSnapshot,
			stat: (*FS).indexAttr, shows: "a consistent snapshot of the bbolt index, taken at each open; size: a snapshot's if taken now (`bolt.Tx.Size`)",
			times: "the index file's mtime (moves with every commit, only then)"},
		KindKeysDir: {name: "keys directory", parent: KindRoot, entry: "keys", ino: InoKeys, mode: modeDir, nlink: 1, cache: CacheForever, content: ContentListing,
			shows: "one directory per key", times: createdTimes},
		KindKeyDir: {name: "key directory", parent: KindKeysDir, class: 0x01, object: objKey, mode: modeDir, nlink: 2 + 1, cache: CacheNotified, negative: true, content: ContentListing,
			render: (*FS).keyView, shows: "a template key", times: keyCreated},
		KindKeyFile: {name: "key file", parent: KindKeyDir, entry: "key", class: 0x02, object: objKey, mode: modeText, nlink: 1, cache: CacheForever, content: ContentText,
			render: (*FS).keyView, shows: "the canonical key text (hashes to `<key-id>`)", times: keyCreated},
		KindKeyGenerationsFile: {name: "key generations file", parent: KindKeyDir, entry: "generations", class: 0x03, object: objKey, mode: modeText, nlink: 1, cache: CacheNever, content: ContentText,
			render: (*FS).keyGenerationsView, shows: "the key's generation IDs, newest first",
			times: "newest generation's publication, or the last deletion of one of the key's retired generations, whichever is later"},
		KindKeyLeasesDir: {name: "key leases directory", parent: KindKeyDir, entry: "leases", class: 0x04, object: objKey, mode: modeLeasesDir, nlink: 2, cache: CacheNotified, content: ContentListing, touch: true,
			render: (*FS).keyView, shows: "the leases on any generation of the key; create = acquire on its newest eligible capture", times: keyCreated},
		KindGenerationsDir: {name: "generations directory", parent: KindRoot, entry: "generations", ino: InoGenerations, mode: modeDir, nlink: 1, cache: CacheForever, content: ContentListing,
			shows: "published generations", times: createdTimes},
		KindLeasesDir: {name: "leases directory", parent: KindRoot, entry: "leases", ino: InoLeases, mode: modeLeasesDir, nlink: 2, cache: CacheForever, content: ContentListing, touch: true,
			shows: "every lease", times: createdTimes},
		KindTombstonesDir: {name: "tombstones directory", parent: KindRoot, entry: "tombstones", ino: InoTombstones, mode: modeDir, nlink: 1, cache: CacheForever, content: ContentListing,
			shows: "tombstoned generations", times: createdTimes},
		KindRetiringDir: {name: "retiring directory", parent: KindRoot, entry: "retiring", ino: InoRetiring, mode: modeDir, nlink: 1, cache: CacheForever, content: ContentListing,
			shows: "retiring generations, readable until their last lease is released", times: createdTimes},
		KindGenerationDir: {name: "generation directory", parent: KindGenerationsDir, class: 0x10, object: objGeneration, mode: modeDir, nlink: 2 + 2, cache: CacheNotified, negative: true, content: ContentListing,
			render: (*FS).generationDirView, shows: "one generation, under the directory of its state", times: "publication; ctime: the tombstone's time once tombstoned"},
		KindManifestFile: {name: "manifest file", parent: KindGenerationDir, entry: "manifest", class: 0x11, object: objGeneration, mode: modeText, nlink: 1, cache: CacheForever, content: ContentText,
			render: (*FS).manifestView, shows: "the decoded manifest.bin", times: publication},
		KindStatusFile: {name: "status file", parent: KindGenerationDir, entry: "status", class: 0x12, object: objGeneration, mode: modeText, nlink: 1, cache: CacheNever, content: ContentText,
			render: (*FS).statusView, shows: "state, whether a new lease would be granted, last refusal",
			times: "last change to what it shows: publication, tombstone, lift, retirement (the record's `state_changed_at`), lease grant or release, a settings change, the last refusal, and the end of the restore window once passed. After a daemon restart `last_refusal` reads `none` and the mtime no longer counts it"},
		KindCtlFile: {name: "ctl file", parent: KindGenerationDir, entry: "ctl", class: 0x15, object: objGeneration, mode: modeCommands, nlink: 1, cache: CacheForever, content: ContentCommands, touch: true,
			render: (*FS).ctlView, shows: "write `tombstone`, `lift` or `retire`; cat: those commands", times: publication},
		KindSumsFile: {name: "sums file", parent: KindGenerationDir, entry: SumsFileName, class: 0x16, object: objGeneration, mode: modeText, nlink: 1, cache: CacheForever, content: ContentText,
			render: (*FS).sumsView, shows: "the payload digests recorded at publication, in `sha256sum -c` format: `cd <gen> && sha256sum -c SHA256SUMS`", times: publication},
		KindPayloadDir: {name: "payload directory", parent: KindGenerationDir, entry: "payload", class: 0x13, object: objGeneration, mode: modeDir, nlink: 2, cache: CacheForever, negative: true, content: ContentListing,
			render: (*FS).generationView, shows: "the published artifacts", times: publication},
		KindPayloadFile: {name: "payload file", parent: KindPayloadDir, class: 0x18, object: objPayload, mode: modeText, nlink: 1, cache: CacheForever, content: ContentPayload,
			stat: (*FS).payloadAttr, shows: "manifest.bin, state.bin, memory.bin[, scratch.img]: the published bytes; size, `st_blocks` and `st_blksize` of the backing file (sparse stays sparse)",
			times: publication},
		KindGenerationLeasesDir: {name: "generation leases directory", parent: KindGenerationDir, entry: "leases", class: 0x14, object: objGeneration, mode: modeLeasesDir, nlink: 2, cache: CacheForever, content: ContentListing, touch: true,
			render: (*FS).generationView, shows: "the generation's leases; create = acquire, unlink = release", times: publication},
		KindLeaseFile: {name: "lease file", parent: KindGenerationLeasesDir, class: 0x20, object: objLease, mode: modeCommands, nlink: leaseNames, cache: CacheNotified, content: ContentCommands, touch: true,
			render: (*FS).leaseView, shows: "one JSON object and a newline; write `pid N`, `kill` or `cancel`; three names, also `leases/<clone-id>` and `keys/<key-id>/leases/<clone-id>`",
			times: "latest of `created_at`, `bound_at`, `updated_at`"},
		KindIncomingDir: {name: "incoming directory", parent: KindRoot, entry: "incoming", ino: InoIncoming, mode: modeLeasesDir, nlink: 2, cache: CacheNever, content: ContentListing,
			shows: "mkdir = a private staging directory on the store's disk", times: createdTimes},
		KindIncomingEntryDir: {name: "incoming staging directory", parent: KindIncomingDir, class: inoClassIncomingDir, object: objIncomingDir, mode: fs.ModeDir | 0o700, nlink: 2, cache: CacheNever, content: ContentListing,
			render: (*FS).incomingView, shows: "`STORE/incoming/<name>/`: a capture in progress", times: dirTimes},
		KindIncomingCtlFile: {name: "incoming ctl file", parent: KindIncomingEntryDir, entry: incomingCtl, class: inoClassIncomingCtl, object: objIncomingDir, mode: modeCommands, nlink: 1, cache: CacheNever, content: ContentCommands, touch: true,
			render: (*FS).incomingView, shows: "write `publish`: publishes the directory, durable when the write returns", times: dirTimes},
		KindIncomingStatusFile: {name: "incoming status file", parent: KindIncomingEntryDir, entry: incomingStatus, class: inoClassIncomingStatus, object: objIncomingDir, mode: modeText, nlink: 1, cache: CacheNever, content: ContentText,
			render: (*FS).incomingView, shows: "open, publishing, published `<gen>` or refused `<errno>: <reason>`", times: dirTimes},
		KindIncomingFile: {name: "incoming file", parent: KindIncomingEntryDir, class: inoClassIncomingFile, object: objIncomingFile, mode: 0o600, nlink: 1, cache: CacheNever, content: ContentBacking,
			stat: (*FS).incomingFileAttr, shows: "the capture's files and class.json: the real backing files, any file I/O", times: "the backing file's mtime"},
		KindEventsFile: {name: "events file", parent: KindRoot, entry: EventsFileName, unlisted: true, ino: InoEvents, mode: modeText, nlink: 1, cache: CacheNever, content: ContentStream,
			shows: "one JSON line per state change from the open (not listed); size 0", times: createdTimes},
		KindMetricsFile: {name: "metrics file", parent: KindRoot, entry: MetricsFileName, unlisted: true, ino: InoMetrics, mode: modeText, nlink: 1, cache: CacheNever, content: ContentText,
			render: (*FS).metricsView, shows: "the daemon's metrics, Prometheus text format, one scrape per open (not listed; docs/metrics.md)",
			times: "the time of the rendering: it shows the daemon's counters as of now"},
	}
	fixedEntries = entriesOf(kinds)
}

// facts returns k's row; the zero row for an invalid Kind.
func (k Kind) facts() *kindFacts {
	if int(k) < len(kinds) {
		return &kinds[k]
	}
	return &kinds[0] // the zero row of Kind 0
}

// String names the kind, e.g. "payload file".
func (k Kind) String() string {
	if name := k.facts().name; name != "" {
		return name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Kinds returns every Kind, in declaration order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds)-1)
	for k := KindRoot; int(k) < len(kinds); k++ {
		out = append(out, k)
	}
	return out
}

// IsDir reports whether nodes of this kind are directories.
func (k Kind) IsDir() bool { return k.facts().mode.IsDir() }

// Cache returns the kind's cache policy.
func (k Kind) Cache() CachePolicy { return k.facts().cache }

// Content returns how the kind's content is served.
func (k Kind) Content() Content { return k.facts().content }

// fixedEntry is a child with a fixed name.
type fixedEntry struct {
	name string
	kind Kind
}

// fixedEntries are the children with fixed names of each directory kind,
// in listing order (the table's), unlisted ones included.
var fixedEntries map[Kind][]fixedEntry

func entriesOf(table []kindFacts) map[Kind][]fixedEntry {
	m := map[Kind][]fixedEntry{}
	for k, r := range table {
		if r.entry != "" {
			m[r.parent] = append(m[r.parent], fixedEntry{r.entry, Kind(k)})
		}
	}
	return m
}

// fixedChild returns the kind of dir's child with fixed name name.
func fixedChild(dir Kind, name string) (Kind, bool) {
	for _, e := range fixedEntries[dir] {
		if e.name == name {
			return e.kind, true
		}
	}
	return 0, false
}

// artifacts lists the payload file names a generation can hold, in the
// order of openvmm-snapshot-format.md §1. The index of a name is part of
// its payload file's inode class, so the list may only grow at the end.
var artifacts = [...]string{manifest.ManifestFileName, manifest.StateFileName, manifest.MemoryFileName, manifest.ScratchFileName}

func artifactIndex(name string) (int, bool) {
	for i, a := range artifacts {
		if a == name {
			return i, true
		}
	}
	return 0, false
}

// Inode numbers: class<<inoClassShift | object number.
const (
	inoClassShift = 56
	// MaxObjectNumber is the largest generation ID, key sequence number or
	// lease sequence number that has an inode number (2^56-1).
	MaxObjectNumber = 1<<inoClassShift - 1
)

// Fixed inode numbers of the nodes that exist once (class 0).
const (
	InoRoot        = 1
	InoStore       = 2
	InoKeys        = 3
	InoGenerations = 4
	InoLeases      = 5
	InoTombstones  = 6
	InoRetiring    = 7
	InoIndex       = 8
	InoEvents      = 10 // after InoIncoming (incoming.go)
)

// Node identifies one object of the tree by kind and persistent identity,
// never by path. Nodes are small comparable values; two Nodes are equal
// exactly when they have the same inode number. The zero Node is invalid.
type Node struct {
	kind Kind
	// num is the object number: the GenerationID for generation kinds and
	// payload files, KeyRecord.Seq for key kinds, Lease.Seq for lease
	// files, 0 for fixed nodes.
	num uint64
	// name is the key ID for key kinds, the clone ID for lease files and
	// the artifact name for payload files.
	name string
}

// Kind returns the node's kind.
func (n Node) Kind() Kind { return n.kind }

// IsDir reports whether the node is a directory.
func (n Node) IsDir() bool { return n.kind.IsDir() }

// Generation returns the generation of a generation-scoped node
// (generation directory and everything below it except lease files), or
// zero.
func (n Node) Generation() store.GenerationID {
	switch n.kind.facts().object {
	case objGeneration, objPayload:
		return store.GenerationID(n.num)
	}
	return 0
}

// Immutable reports whether the node's kind has cache policy
// CacheForever: the root and its fixed directories, payload and
// generation leases directories, payload files, manifest, ctl and key
// files. Adapters may let the kernel cache these for long; everything
// else can change at any commit and must not be cached.
func (n Node) Immutable() bool { return n.kind.Cache() == CacheForever }

// Ino returns the node's inode number, stable across unmounts and daemon
// restarts: the fixed numbers InoRoot..InoMetrics, else
// class<<56 | object number with the classes of the node table.
func (n Node) Ino() uint64 {
	r := n.kind.facts()
	if r.object == objFixed {
		return r.ino
	}
	class := r.class
	if r.object == objPayload {
		i, _ := artifactIndex(n.name)
		class += uint64(i)
	}
	return class<<inoClassShift | n.num
}

// String describes the node for logs, e.g. "payload file g000003/memory.bin".
func (n Node) String() string {
	switch n.kind.facts().object {
	case objKey, objIncomingDir, objIncomingFile:
		return fmt.Sprintf("%s %s", n.kind, n.name)
	case objPayload:
		return fmt.Sprintf("%s %s/%s", n.kind, store.GenerationID(n.num), n.name)
	case objLease:
		return fmt.Sprintf("%s %s (seq %d)", n.kind, n.name, n.num)
	case objGeneration:
		if n.num != 0 {
			return fmt.Sprintf("%s %s", n.kind, store.GenerationID(n.num))
		}
	}
	return n.kind.String()
}

func fixedNode(k Kind) Node { return Node{kind: k} }

func objectNode(k Kind, num uint64, name string) (Node, error) {
	if num == 0 || num > MaxObjectNumber {
		return Node{}, fmt.Errorf("%s %q: object number %d outside 1..%d: %w", k, name, num, uint64(MaxObjectNumber), ErrInoOverflow)
	}
	return Node{kind: k, num: num, name: name}, nil
}

func genNode(k Kind, g store.GenerationID) (Node, error) {
	return objectNode(k, uint64(g), "")
}
