package leasefs

import (
	"fmt"

	"templatefs/store"
	"templatefs/store/manifest"
)

// Kind is the kind of a node in the tree (see the package doc drawing).
type Kind uint8

// Node kinds. Each has one inode class (see Node.Ino).
const (
	KindRoot                Kind = iota + 1 // /
	KindStoreFile                           // store
	KindKeysDir                             // keys/
	KindKeyDir                              // keys/<key-id>/
	KindKeyFile                             // keys/<key-id>/key
	KindKeyGenerationsFile                  // keys/<key-id>/generations
	KindGenerationsDir                      // generations/
	KindTombstonesDir                       // tombstones/
	KindGenerationDir                       // generations/<gen>/ or tombstones/<gen>/
	KindManifestFile                        // <gen>/manifest
	KindStatusFile                          // <gen>/status
	KindPayloadDir                          // <gen>/payload/
	KindPayloadFile                         // <gen>/payload/<artifact>
	KindGenerationLeasesDir                 // <gen>/leases/
	KindLeasesDir                           // leases/
	KindLeaseFile                           // <gen>/leases/<clone-id>, leases/<clone-id>, keys/<key-id>/leases/<clone-id>
	KindRetiringDir                         // retiring/
	KindKeyLeasesDir                        // keys/<key-id>/leases/
	KindCtlFile                             // <gen>/ctl
	KindIndexFile                           // store.db
	KindIncomingDir                         // incoming/
	KindIncomingEntryDir                    // incoming/<name>/
	KindIncomingFile                        // incoming/<name>/<file>
	KindIncomingCtlFile                     // incoming/<name>/ctl
	KindIncomingStatusFile                  // incoming/<name>/status
	KindEventsFile                          // events
	KindMetricsFile                         // metrics
)

var kindNames = [...]string{
	KindRoot:                "root",
	KindStoreFile:           "store file",
	KindKeysDir:             "keys directory",
	KindKeyDir:              "key directory",
	KindKeyFile:             "key file",
	KindKeyGenerationsFile:  "key generations file",
	KindGenerationsDir:      "generations directory",
	KindTombstonesDir:       "tombstones directory",
	KindGenerationDir:       "generation directory",
	KindManifestFile:        "manifest file",
	KindStatusFile:          "status file",
	KindPayloadDir:          "payload directory",
	KindPayloadFile:         "payload file",
	KindGenerationLeasesDir: "generation leases directory",
	KindLeasesDir:           "leases directory",
	KindLeaseFile:           "lease file",
	KindRetiringDir:         "retiring directory",
	KindKeyLeasesDir:        "key leases directory",
	KindCtlFile:             "ctl file",
	KindIndexFile:           "index snapshot file",
	KindIncomingDir:         "incoming directory",
	KindIncomingEntryDir:    "incoming staging directory",
	KindIncomingFile:        "incoming file",
	KindIncomingCtlFile:     "incoming ctl file",
	KindIncomingStatusFile:  "incoming status file",
	KindEventsFile:          "events file",
	KindMetricsFile:         "metrics file",
}

// String names the kind, e.g. "payload file".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Kinds returns every Kind, in declaration order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kindNames)-1)
	for k := KindRoot; int(k) < len(kindNames); k++ {
		out = append(out, k)
	}
	return out
}

// IsDir reports whether nodes of this kind are directories.
func (k Kind) IsDir() bool {
	switch k {
	case KindRoot, KindKeysDir, KindKeyDir, KindGenerationsDir, KindTombstonesDir, KindRetiringDir,
		KindGenerationDir, KindPayloadDir, KindGenerationLeasesDir, KindLeasesDir, KindKeyLeasesDir,
		KindIncomingDir, KindIncomingEntryDir:
		return true
	}
	return false
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

// inoClass is the class byte of each kind with a per-object number.
// Payload files add their artifact index.
var inoClass = map[Kind]uint64{
	KindKeyDir:              0x01,
	KindKeyFile:             0x02,
	KindKeyGenerationsFile:  0x03,
	KindKeyLeasesDir:        0x04,
	KindGenerationDir:       0x10,
	KindManifestFile:        0x11,
	KindStatusFile:          0x12,
	KindPayloadDir:          0x13,
	KindGenerationLeasesDir: 0x14,
	KindCtlFile:             0x15,
	KindPayloadFile:         0x18, // + artifact index, up to 0x1f
	KindLeaseFile:           0x20,
	KindIncomingEntryDir:    inoClassIncomingDir,
	KindIncomingFile:        inoClassIncomingFile,
	KindIncomingCtlFile:     inoClassIncomingCtl,
	KindIncomingStatusFile:  inoClassIncomingStatus,
}

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
	switch n.kind {
	case KindGenerationDir, KindManifestFile, KindStatusFile, KindPayloadDir, KindPayloadFile, KindGenerationLeasesDir, KindCtlFile:
		return store.GenerationID(n.num)
	}
	return 0
}

// Immutable reports whether the node's attributes never change and its
// name never leaves its parent while its generation or key exists, and for
// files also their content: the root and its fixed directories, payload
// and generation leases directories, payload files, manifest, ctl and key
// files (a ctl file always reads the same; writes to it change other
// nodes). A directory's listing is not covered. Adapters may let the
// kernel cache these for long; everything else can change at any commit
// and must not be cached.
func (n Node) Immutable() bool {
	switch n.kind {
	case KindRoot, KindKeysDir, KindGenerationsDir, KindLeasesDir, KindTombstonesDir, KindRetiringDir,
		KindPayloadDir, KindGenerationLeasesDir, KindPayloadFile, KindManifestFile, KindKeyFile, KindCtlFile:
		return true
	}
	return false
}

// Ino returns the node's inode number, stable across unmounts and daemon
// restarts: the fixed numbers InoRoot..InoMetrics, else
// class<<56 | object number with the classes of the package doc.
func (n Node) Ino() uint64 {
	switch n.kind {
	case KindRoot:
		return InoRoot
	case KindStoreFile:
		return InoStore
	case KindKeysDir:
		return InoKeys
	case KindGenerationsDir:
		return InoGenerations
	case KindLeasesDir:
		return InoLeases
	case KindTombstonesDir:
		return InoTombstones
	case KindRetiringDir:
		return InoRetiring
	case KindIndexFile:
		return InoIndex
	case KindIncomingDir:
		return InoIncoming
	case KindEventsFile:
		return InoEvents
	case KindMetricsFile:
		return InoMetrics
	}
	class := inoClass[n.kind]
	if n.kind == KindPayloadFile {
		i, _ := artifactIndex(n.name)
		class += uint64(i)
	}
	return class<<inoClassShift | n.num
}

// String describes the node for logs, e.g. "payload file g000003/memory.bin".
func (n Node) String() string {
	switch n.kind {
	case KindKeyDir, KindKeyFile, KindKeyGenerationsFile, KindKeyLeasesDir:
		return fmt.Sprintf("%s %s", n.kind, n.name)
	case KindPayloadFile:
		return fmt.Sprintf("%s %s/%s", n.kind, store.GenerationID(n.num), n.name)
	case KindLeaseFile:
		return fmt.Sprintf("%s %s (seq %d)", n.kind, n.name, n.num)
	case KindIncomingEntryDir, KindIncomingFile, KindIncomingCtlFile, KindIncomingStatusFile:
		return fmt.Sprintf("%s %s", n.kind, n.name)
	}
	if g := n.Generation(); g != 0 {
		return fmt.Sprintf("%s %s", n.kind, g)
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
