package leasefs

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"templatefs/store"
)

func TestLookup(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	tests := []struct {
		path string
		kind Kind // zero when want is not OK
		want Errno
	}{
		{".", KindRoot, OK},
		{"store", KindStoreFile, OK},
		{"keys", KindKeysDir, OK},
		{"keys/" + fx.gens[1].KeyID, KindKeyDir, OK},
		{"keys/" + fx.gens[1].KeyID + "/key", KindKeyFile, OK},
		{"keys/" + fx.gens[1].KeyID + "/generations", KindKeyGenerationsFile, OK},
		{"generations", KindGenerationsDir, OK},
		{"generations/g000001", KindGenerationDir, OK},
		{"generations/g000001/manifest", KindManifestFile, OK},
		{"generations/g000001/status", KindStatusFile, OK},
		{"generations/g000001/payload", KindPayloadDir, OK},
		{"generations/g000001/payload/manifest.bin", KindPayloadFile, OK},
		{"generations/g000001/payload/state.bin", KindPayloadFile, OK},
		{"generations/g000001/payload/memory.bin", KindPayloadFile, OK},
		{"generations/g000001/leases", KindGenerationLeasesDir, OK},
		{"generations/g000001/leases/c1", KindLeaseFile, OK},
		{"leases", KindLeasesDir, OK},
		{"store.db", KindIndexFile, OK},
		{"events", KindEventsFile, OK},
		{"leases/c1", KindLeaseFile, OK},
		{"leases/c2", KindLeaseFile, OK},
		{"tombstones", KindTombstonesDir, OK},
		{"tombstones/g000002", KindGenerationDir, OK},
		{"tombstones/g000002/status", KindStatusFile, OK},
		{"tombstones/g000002/payload/memory.bin", KindPayloadFile, OK},
		{"tombstones/g000002/leases/c2", KindLeaseFile, OK},
		{"generations/g000004", KindGenerationDir, OK}, // ineligible, still published
		{"retiring", KindRetiringDir, OK},
		{"retiring/g000005", KindGenerationDir, OK}, // retiring
		{"retiring/g000005/leases/c5", KindLeaseFile, OK},
		{"retiring/g000005/ctl", KindCtlFile, OK},
		{"generations/g000001/ctl", KindCtlFile, OK},
		{"keys/" + fx.gens[1].KeyID + "/leases", KindKeyLeasesDir, OK},
		{"keys/" + fx.gens[1].KeyID + "/leases/c1", KindLeaseFile, OK},
		{"keys/" + fx.gens[1].KeyID + "/leases/c5", KindLeaseFile, OK},

		{"nope", 0, ENOENT},
		{"keys/" + strings.Repeat("0", 64), 0, ENOENT},
		{"keys/not-a-key", 0, ENOENT},
		{"keys/" + fx.gens[1].KeyID + "/nope", 0, ENOENT},
		{"generations/g000002", 0, ENOENT}, // tombstoned: only under tombstones/
		{"tombstones/g000001", 0, ENOENT},  // published: only under generations/
		{"generations/g000005", 0, ENOENT}, // retiring: only under retiring/
		{"tombstones/g000005", 0, ENOENT},
		{"retiring/g000002", 0, ENOENT},
		{"keys/" + fx.gens[1].KeyID + "/leases/nobody", 0, ENOENT},
		{"keys/" + fx.gens[1].KeyID + "/leases/.bad", 0, ENOENT},
		{"generations/g000001/ctl/x", 0, ENOTDIR},
		{"generations/g000009", 0, ENOENT},
		{"generations/g1", 0, ENOENT}, // not the one spelling of g000001
		{"generations/g000001/nope", 0, ENOENT},
		{"generations/g000001/payload/scratch.img", 0, ENOENT}, // not captured
		{"generations/g000001/payload/resume.claim", 0, ENOENT},
		{"generations/g000001/leases/c2", 0, ENOENT}, // lease of another generation
		{"generations/g000001/leases/nobody", 0, ENOENT},
		{"generations/g000001/leases/.bad", 0, ENOENT},
		{"leases/nobody", 0, ENOENT},
		{"store/x", 0, ENOTDIR},
		{"generations/g000001/status/x", 0, ENOTDIR},
		{"generations/g000001/payload/memory.bin/x", 0, ENOTDIR},
		{"leases/c1/x", 0, ENOTDIR},
		{"keys/" + fx.gens[1].KeyID + "/key/x", 0, ENOTDIR},
		{"/store", 0, EINVAL},
		{"generations/", 0, EINVAL},
		{"generations/../store", 0, EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			n, err := fx.fs.Walk(tt.path)
			if got := ToErrno(err); got != tt.want {
				t.Fatalf("Walk(%q) = %v (%v), want %v", tt.path, got, err, tt.want)
			}
			if err == nil && n.Kind() != tt.kind {
				t.Errorf("Walk(%q) kind = %v, want %v", tt.path, n.Kind(), tt.kind)
			}
		})
	}
}

// TestTreeConsistency walks the whole tree with ReadDir and checks each
// entry several ways, fstest-style: Lookup finds the same node, Attr
// reports the same inode number and the right type, and inode numbers are
// unique except for a lease file seen under both of its names.
func TestTreeConsistency(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	if err := fx.st.MakeIncoming("cap1"); err != nil {
		t.Fatal(err)
	}
	dir, _ := fx.st.IncomingPath("cap1")
	if err := os.WriteFile(filepath.Join(dir, "capture", "memory.bin"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tree := fx.walkTree()
	byIno := map[uint64]string{}
	for _, p := range slices.Sorted(maps.Keys(tree)) {
		n := tree[p]
		if p != "." {
			dir, name := fx.parent(p)
			got, err := fx.fs.Lookup(dir, name)
			if err != nil || got != n {
				t.Errorf("%s: Lookup = %v, %v; ReadDir gave %v", p, got, err, n)
			}
		}
		a, err := fx.fs.Attr(n)
		if err != nil {
			t.Errorf("%s: Attr: %v", p, err)
			continue
		}
		if a.Ino != n.Ino() || a.Mode.IsDir() != n.IsDir() {
			t.Errorf("%s: Attr ino %#x dir %v, node ino %#x dir %v", p, a.Ino, a.Mode.IsDir(), n.Ino(), n.IsDir())
		}
		if other, dup := byIno[a.Ino]; dup {
			if n.Kind() != KindLeaseFile || filepath.Base(other) != filepath.Base(p) {
				t.Errorf("inode %#x at both %s and %s", a.Ino, other, p)
			}
		}
		byIno[a.Ino] = p
	}
	var kinds []Kind
	for _, n := range tree {
		if !slices.Contains(kinds, n.Kind()) {
			kinds = append(kinds, n.Kind())
		}
	}
	if len(kinds) != len(Kinds())-2 || slices.Contains(kinds, KindEventsFile) || slices.Contains(kinds, KindMetricsFile) {
		t.Errorf("tree holds %d node kinds, want all %d but the unlisted events and metrics files: %v", len(kinds), len(Kinds())-2, kinds)
	}
	gen := func(dir, g string, leases ...string) []string {
		p := dir + "/" + g
		out := []string{p, p + "/" + SumsFileName, p + "/ctl", p + "/leases", p + "/manifest", p + "/payload", p + "/payload/manifest.bin",
			p + "/payload/memory.bin", p + "/payload/state.bin", p + "/status"}
		for _, l := range leases {
			out = append(out, p+"/leases/"+l)
		}
		return out
	}
	key := "keys/" + fx.gens[1].KeyID
	want := slices.Concat(
		[]string{".", "generations", "keys", key, key + "/generations", key + "/key", key + "/leases", key + "/leases/c1", key + "/leases/c2", key + "/leases/c5",
			"leases", "leases/c1", "leases/c2", "leases/c5", "retiring", "store", "store.db", "tombstones",
			"incoming", "incoming/cap1", "incoming/cap1/ctl", "incoming/cap1/status", "incoming/cap1/memory.bin"},
		gen("generations", "g000001", "c1"), gen("generations", "g000003"), gen("generations", "g000004"),
		gen("tombstones", "g000002", "c2"), gen("retiring", "g000005", "c5"),
	)
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(tree)); !slices.Equal(got, want) {
		t.Errorf("tree paths:\n got %q\nwant %q", got, want)
	}
}

func TestInoStableAcrossReopen(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	before := fx.walkTree()
	fx.reopen()
	after := fx.walkTree()
	if len(before) != len(after) {
		t.Fatalf("tree has %d paths before reopen, %d after", len(before), len(after))
	}
	for p, n := range before {
		if after[p].Ino() != n.Ino() {
			t.Errorf("%s: ino %#x before reopen, %#x after", p, n.Ino(), after[p].Ino())
		}
	}
}

func TestInoEncoding(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	l1, err := fx.st.Lease("c1")
	if err != nil {
		t.Fatal(err)
	}
	k, err := fx.st.Key(fx.gens[1].KeyID)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want uint64
	}{
		{".", InoRoot},
		{"store", InoStore},
		{"store.db", InoIndex},
		{"events", InoEvents},
		{"keys", InoKeys},
		{"generations", InoGenerations},
		{"leases", InoLeases},
		{"tombstones", InoTombstones},
		{"retiring", InoRetiring},
		{"keys/" + k.ID, 0x01<<56 | k.Seq},
		{"keys/" + k.ID + "/leases", 0x04<<56 | k.Seq},
		{"keys/" + k.ID + "/leases/c1", 0x20<<56 | l1.Seq},
		{"generations/g000003/ctl", 0x15<<56 | 3},
		{"retiring/g000005", 0x10<<56 | 5},
		{"keys/" + k.ID + "/key", 0x02<<56 | k.Seq},
		{"keys/" + k.ID + "/generations", 0x03<<56 | k.Seq},
		{"generations/g000003", 0x10<<56 | 3},
		{"generations/g000003/manifest", 0x11<<56 | 3},
		{"generations/g000003/status", 0x12<<56 | 3},
		{"generations/g000003/payload", 0x13<<56 | 3},
		{"generations/g000003/leases", 0x14<<56 | 3},
		{"generations/g000003/payload/manifest.bin", 0x18<<56 | 3},
		{"generations/g000003/payload/state.bin", 0x19<<56 | 3},
		{"generations/g000003/payload/memory.bin", 0x1a<<56 | 3},
		{"tombstones/g000002/payload/memory.bin", 0x1a<<56 | 2},
		{"leases/c1", 0x20<<56 | l1.Seq},
		{"generations/g000001/leases/c1", 0x20<<56 | l1.Seq},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := fx.walk(tt.path).Ino(); got != tt.want {
				t.Errorf("Ino = %#x, want %#x", got, tt.want)
			}
		})
	}
	if _, err := objectNode(KindGenerationDir, MaxObjectNumber+1, ""); ToErrno(err) != EOVERFLOW {
		t.Errorf("object number 2^56: %v, want EOVERFLOW", err)
	}
}

// TestLeaseNodeIdentity: a released lease acquired again under the same
// clone ID is a new node with a new inode number; the old node is gone.
func TestLeaseNodeIdentity(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	old := fx.walk("leases/c1")
	if err := fx.st.CancelLease("c1"); err != nil {
		t.Fatal(err)
	}
	fx.acquire(3, "c1")
	now := fx.walk("leases/c1")
	if now == old || now.Ino() == old.Ino() {
		t.Fatalf("reacquired lease kept node %v", old)
	}
	if _, err := fx.fs.Attr(old); ToErrno(err) != ENOENT {
		t.Errorf("Attr of released lease node = %v, want ENOENT", err)
	}
	if _, err := fx.fs.Open(old, OpenFlags{}, owner); ToErrno(err) != ENOENT {
		t.Errorf("Open of released lease node = %v, want ENOENT", err)
	}
	if _, err := fx.fs.Attr(now); err != nil {
		t.Errorf("Attr of new lease node: %v", err)
	}
}

// TestNoPlatformImports: leasefs is platform-neutral (style-examples.md,
// "Arrows only point down").
func TestNoPlatformImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "go-fuse") || strings.Contains(dep, "cgofuse") || dep == "golang.org/x/sys/windows" {
			t.Errorf("leasefs depends on %s", dep)
		}
	}
}

func TestWalkPathErrors(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	_, err := fx.fs.Walk("generations/g000002/status")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "generations/g000002/status") {
		t.Errorf("Walk error %q: want store.ErrNotFound naming the path", err)
	}
	if _, err := fx.fs.Walk("a//b"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Walk(a//b) = %v, want fs.ErrInvalid", err)
	}
}
