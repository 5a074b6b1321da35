package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Damaged-index tests take a real store's index.db, damage it the way a bad
// disk or a short copy does, and use the store: Open, Check and every read,
// first in a child process (this test binary again, see init) so that a
// crash, even a fatal SIGBUS, is seen as a failed test rather than killing
// the test binary, then in-process to check the errors themselves.

const (
	childDamagedEnv = "STORE_TEST_CHILD_DAMAGED" // store directory
	childStepsEnv   = "STORE_TEST_CHILD_STEPS"   // what the child does, see damagedChild
)

func init() {
	dir := os.Getenv(childDamagedEnv)
	if dir == "" {
		return
	}
	out, err := damagedChild(dir, os.Getenv(childStepsEnv))
	fmt.Print(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// damagedChild runs steps on the store in dir and reports each outcome as
// one line. Steps "use" (the default): open it as fsck does (NoRecover),
// check it and read everything, close, then open it as the daemon does
// and read again. Steps "truncate-then-read" and "truncate-then-write":
// open it, cut index.db to its two meta pages under the open store, then
// read (Info) or write (AcquireLease) first, then try the other (and
// after a first read, read again), then report ReadOnly and close.
func damagedChild(dir, steps string) (string, error) {
	var out strings.Builder
	opts := Options{Logger: slog.New(slog.NewTextHandler(&out, nil))}
	switch steps {
	case "", "use":
		for _, noRecover := range []bool{true, false} {
			opts.NoRecover = noRecover
			st, err := Open(dir, opts)
			if err != nil {
				return out.String(), err
			}
			problems, err := st.Check(CheckOptions{})
			fmt.Fprintf(&out, "check: %d problems %v, err %v\n", len(problems), problems, err)
			_, err = st.Info()
			fmt.Fprintf(&out, "info: %v\n", err)
			gens, err := st.Generations()
			fmt.Fprintf(&out, "generations: %d, %v\n", len(gens), err)
			leases, err := st.Leases()
			fmt.Fprintf(&out, "leases: %d, %v\n", len(leases), err)
			if err := st.Close(); err != nil {
				return out.String(), err
			}
		}
		return out.String(), nil
	case "zero-page-then-refused-write":
		// STORE_TEST_CHILD_PAGE names a page the refused write does not
		// read (a page of the leases bucket); it is zeroed under the
		// open store, then a tombstone of a missing generation is refused
		// inside its transaction, which is rolled back.
		st, err := Open(dir, opts)
		if err != nil {
			return out.String(), err
		}
		var page int64
		fmt.Sscan(os.Getenv("STORE_TEST_CHILD_PAGE"), &page)
		f, err := os.OpenFile(filepath.Join(dir, IndexFile), os.O_WRONLY, 0)
		if err != nil {
			return out.String(), err
		}
		_, err = f.WriteAt(make([]byte, 4096), page*4096)
		f.Close()
		if err != nil {
			return out.String(), err
		}
		_, err = st.Tombstone(999, 0)
		fmt.Fprintf(&out, "refused write: %v\n", err)
		_, err = st.Info()
		fmt.Fprintf(&out, "read: %v\n", err)
		fmt.Fprintf(&out, "read-only: %v\n", st.ReadOnly())
		fmt.Fprintf(&out, "close: %v\n", st.Close())
		return out.String(), nil
	case "truncate-then-read", "truncate-then-write":
		st, err := Open(dir, opts)
		if err != nil {
			return out.String(), err
		}
		if err := os.Truncate(filepath.Join(dir, IndexFile), 2*4096); err != nil {
			return out.String(), err
		}
		read := func() { _, err := st.Info(); fmt.Fprintf(&out, "read: %v\n", err) }
		write := func() { _, _, err := st.AcquireLease(1, "after-damage"); fmt.Fprintf(&out, "write: %v\n", err) }
		if steps == "truncate-then-read" {
			read()
			read() // the damage again: an error, not another log line with a stack
			write()
			read()
		} else {
			write()
			read()
		}
		fmt.Fprintf(&out, "read-only: %v\n", st.ReadOnly())
		fmt.Fprintf(&out, "close: %v\n", st.Close())
		return out.String(), nil
	}
	return "", fmt.Errorf("%s=%q: unknown steps", childStepsEnv, steps)
}

// runDamagedChild runs damagedChild in a child process and fails the test
// if the child crashed (a panic, a fatal signal, an exit status other
// than 0 and 1). It returns the child's exit status and output.
func runDamagedChild(t *testing.T, dir, steps string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDamagedEnv+"="+dir, childStepsEnv+"="+steps)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if (err != nil && code != 1) || strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "fatal error") {
		t.Fatalf("child crashed (%v, exit %d):\nstdout:\n%s\nstderr:\n%s", err, code, stdout.String(), stderr.String())
	}
	return code, stdout.String() + stderr.String()
}

var (
	damageBaseOnce sync.Once
	damageBaseDir  string
	damageBaseErr  error
)

// damageBase returns a closed store holding one generation and 300 leases
// (so that its buckets span branch and leaf pages), made once per test
// binary; tests damage copies of it (copyStore).
func damageBase(t *testing.T) string {
	t.Helper()
	damageBaseOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "damage-base")
		if err != nil {
			damageBaseErr = err
			return
		}
		damageBaseDir = filepath.Join(tmp, "store")
		damageBaseErr = makeDamageBase(damageBaseDir)
	})
	if damageBaseErr != nil {
		t.Fatal(damageBaseErr)
	}
	return damageBaseDir
}

func makeDamageBase(dir string) error {
	if err := Init(dir); err != nil {
		return err
	}
	st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer st.Close()
	// The records are written directly, in one transaction: the shapes of
	// the real ones, without 300 fsyncs.
	return st.db.Update(func(tx *bolt.Tx) error {
		id, err := tx.Bucket(bucketGenerations).NextSequence()
		if err != nil {
			return err
		}
		g := Generation{ID: GenerationID(id), KeyID: strings.Repeat("ab", 32), State: Published,
			Artifacts: []Artifact{{Name: "state.bin", Size: 1, SHA256: strings.Repeat("00", 32)}}}
		if err := putJSON(tx.Bucket(bucketGenerations), genKey(g.ID), g); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketKeys), []byte(g.KeyID), KeyRecord{ID: g.KeyID, Seq: 1, Canonical: "key"}); err != nil {
			return err
		}
		kg, err := tx.Bucket(bucketKeyGenerations).CreateBucket([]byte(g.KeyID))
		if err != nil {
			return err
		}
		if err := kg.Put(genKey(g.ID), nil); err != nil {
			return err
		}
		gl, err := tx.Bucket(bucketGenerationLeases).CreateBucket(genKey(g.ID))
		if err != nil {
			return err
		}
		for i := range 300 {
			l := Lease{CloneID: fmt.Sprintf("clone-%03d", i), Generation: g.ID, KeyID: g.KeyID, Seq: uint64(i + 1), State: Reserved}
			if err := writeLeaseRow(tx, l); err != nil {
				return err
			}
			if err := gl.Put([]byte(l.CloneID), nil); err != nil {
				return err
			}
		}
		payload := filepath.Join(dir, PayloadDir, g.ID.String())
		if err := os.Mkdir(payload, 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(payload, "state.bin"), []byte{0}, 0o400)
	})
}

// copyStore copies the store src into a new directory and returns it.
func copyStore(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// indexLayout reads what the damage needs from the (undamaged) index.db
// at path: the meta bbolt uses, and which pages it uses (metas, tree,
// freelist).
func indexLayout(t *testing.T, path string) (boltMeta, []bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, other, err := readMeta(f, fi.Size())
	if err != nil || other != nil {
		t.Fatalf("undamaged index: meta %v, other meta %v", err, other)
	}
	w := &treeWalk{f: f, ps: int64(m.pageSize), hwm: m.pgid, used: make([]bool, m.pgid)}
	w.used[0], w.used[1] = true, true
	if _, err := w.tree(m.root, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if m.freelist != boltNoFreelist {
		if err := w.freelist(m.freelist); err != nil {
			t.Fatal(err)
		}
	}
	return m, w.used
}

// writeAt overwrites index.db of dir at off with b.
func writeAt(t *testing.T, dir string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, IndexFile), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// wantCorrupt checks that the child refused the store with ErrIndexCorrupt's
// message naming the file, detail and restore advice, and that Open in
// this process returns ErrIndexCorrupt and leaves index.db as it was.
func wantCorrupt(t *testing.T, dir, detail string) {
	t.Helper()
	path := filepath.Join(dir, IndexFile)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	code, out := runDamagedChild(t, dir, "use")
	for _, want := range []string{"index is damaged", path, detail, "templatefs restore"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("child: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	for _, noRecover := range []bool{true, false} {
		st, err := Open(dir, Options{NoRecover: noRecover, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			st.Close()
		}
		if !errors.Is(err, ErrIndexCorrupt) || !strings.Contains(err.Error(), detail) {
			t.Errorf("Open(NoRecover %v) = %v, want ErrIndexCorrupt: ...%s", noRecover, err, detail)
		}
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Errorf("index.db changed by opening it (%d bytes, then %d, %v)", len(before), len(after), err)
	}
}

// wantWorks checks that the child used the store without a problem and
// that Check in this process finds none.
func wantWorks(t *testing.T, dir string) string {
	t.Helper()
	code, out := runDamagedChild(t, dir, "use")
	if code != 0 || !strings.Contains(out, "check: 0 problems") || strings.Contains(out, "err index") {
		t.Errorf("child: exit %d, want a clean store:\n%s", code, out)
	}
	st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if problems, err := st.Check(CheckOptions{}); err != nil || len(problems) > 0 {
		t.Errorf("Check = %v, %v; want none", problems, err)
	}
	return out
}

func TestOpenTruncatedIndex(t *testing.T) {
	base := damageBase(t)
	m, _ := indexLayout(t, filepath.Join(base, IndexFile))
	ps := int64(m.pageSize)
	fi, err := os.Stat(filepath.Join(base, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		size   int64
		detail string
	}{
		{"empty", 0, "the file is empty"},
		{"less than a page", 100, "less than its two meta pages"},
		{"one page", ps, fmt.Sprintf("the file is %d bytes, less than its two meta pages of %d bytes each (%d bytes)", ps, ps, 2*ps)},
		{"between the metas and the data", 2*ps + 10, "it was cut short"},
		{"mid-file", int64(m.pgid) / 2 * ps, "it was cut short"},
		{"last page missing", int64(m.pgid-1) * ps, "it was cut short"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.size >= fi.Size() {
				t.Fatalf("index of %d bytes is too small to cut to %d", fi.Size(), tt.size)
			}
			dir := copyStore(t, base)
			if err := os.Truncate(filepath.Join(dir, IndexFile), tt.size); err != nil {
				t.Fatal(err)
			}
			wantCorrupt(t, dir, tt.detail)
		})
	}
}

// TestOpenIndexMetaZeroed: bbolt keeps two meta pages and uses the valid
// one with the higher txid. One zeroed meta page is therefore survivable:
// zeroing the older changes nothing; zeroing the newer falls back to the
// commit before it (as after a meta write torn by a crash), which Open
// logs, and it then removes no payload directory, since the commit it
// lost may be the record of one. Both zeroed is ErrIndexCorrupt.
func TestOpenIndexMetaZeroed(t *testing.T) {
	base := damageBase(t)
	zero := make([]byte, 4096)
	newer := func(t *testing.T, dir string) int64 {
		f, err := os.Open(filepath.Join(dir, IndexFile))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m0, err0 := metaAt(f, 0)
		m1, err1 := metaAt(f, 4096)
		if err0 != nil || err1 != nil {
			t.Fatal(err0, err1)
		}
		if m1.txid > m0.txid {
			return 4096
		}
		return 0
	}
	t.Run("older", func(t *testing.T) {
		dir := copyStore(t, base)
		writeAt(t, dir, 4096-newer(t, dir), zero)
		code, out := runDamagedChild(t, dir, "use")
		for _, want := range []string{"leases: 300, <nil>", "meta page invalid", "index index.db: meta page", "bbolt uses the other meta page"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("child: exit %d, want all 300 leases, a warning and Check reporting the meta; output lacks %q:\n%s", code, want, out)
			}
		}
	})
	t.Run("newer", func(t *testing.T) {
		dir := copyStore(t, base)
		// A commit after the base's: a publication's record for g000002,
		// whose payload is then on disk (the sequence was reserved before).
		st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.db.Update(func(tx *bolt.Tx) error {
			_, err := tx.Bucket(bucketGenerations).NextSequence()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		g := Generation{ID: 2, KeyID: strings.Repeat("ab", 32), State: Published}
		if err := st.db.Update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bucketGenerations), genKey(2), g) }); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if err := os.Mkdir(filepath.Join(dir, PayloadDir, "g000002"), 0o700); err != nil {
			t.Fatal(err)
		}
		writeAt(t, dir, newer(t, dir), zero)
		code, out := runDamagedChild(t, dir, "use")
		if code != 0 || !strings.Contains(out, "meta page invalid") || !strings.Contains(out, "generations: 1,") ||
			!strings.Contains(out, "keeping payload without a generation record") {
			t.Errorf("child: exit %d; want the older commit (one generation), a warning, the payload kept:\n%s", code, out)
		}
		if _, err := os.Stat(filepath.Join(dir, PayloadDir, "g000002")); err != nil {
			t.Errorf("payload of the lost commit: %v, want it kept", err)
		}
	})
	t.Run("both", func(t *testing.T) {
		dir := copyStore(t, base)
		writeAt(t, dir, 0, zero)
		writeAt(t, dir, 4096, zero)
		wantCorrupt(t, dir, "no valid meta page")
	})
}

// TestOpenIndexPagesOverwritten overwrites random pages with random bytes
// (seeded): a page of the tree makes the index corrupt; a free page is
// harmless, since bbolt rebuilds the freelist from the tree at open
// (NoFreelistSync) and never reads a free page.
func TestOpenIndexPagesOverwritten(t *testing.T) {
	base := damageBase(t)
	m, used := indexLayout(t, filepath.Join(base, IndexFile))
	ps := int64(m.pageSize)
	free := -1
	for id := range used {
		if !used[id] {
			free = id
			break
		}
	}
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 8))
		pages := []int{2 + r.IntN(int(m.pgid)-2), 2 + r.IntN(int(m.pgid)-2)}
		if seed == 0 {
			if free < 0 {
				t.Fatal("the base index has no free page")
			}
			pages = []int{free} // one case that must be harmless
		}
		t.Run(fmt.Sprintf("seed %d pages %v", seed, pages), func(t *testing.T) {
			dir := copyStore(t, base)
			inTree := false
			for _, id := range pages {
				junk := make([]byte, ps)
				for i := range junk {
					junk[i] = byte(r.Uint32())
				}
				writeAt(t, dir, int64(id)*ps, junk)
				inTree = inTree || used[id]
			}
			if inTree {
				wantCorrupt(t, dir, "page")
			} else {
				wantWorks(t, dir)
			}
		})
	}
}

// TestOpenIndexFreelistInUse: the store's own commits write no freelist
// (NoFreelistSync: the meta says none, and a free page's content is never
// read, see TestOpenIndexPagesOverwritten). But an index last written by a
// bbolt that syncs its freelist (Init, bbolt tools, any other writer)
// carries one, and bbolt trusts it at open: a freelist naming a page in
// use would let the next commit overwrite live data. Open refuses it.
func TestOpenIndexFreelistInUse(t *testing.T) {
	base := damageBase(t)
	dir := copyStore(t, base)
	path := filepath.Join(dir, IndexFile)
	db, err := bolt.Open(path, 0o600, nil) // syncs a freelist at open
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	m, _ := indexLayout(t, path)
	if m.freelist == boltNoFreelist {
		t.Fatal("bbolt wrote no freelist")
	}
	wantWorks(t, copyStore(t, dir)) // the synced freelist itself is fine
	off := int64(m.freelist) * int64(m.pageSize)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, boltPageHeader+8)
	_, err = f.ReadAt(hdr, off)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if native.Uint16(hdr[10:]) == 0 || native.Uint16(hdr[10:]) == 0xFFFF {
		t.Fatalf("freelist page %d lists %d pages; want a short list to edit", m.freelist, native.Uint16(hdr[10:]))
	}
	writeAt(t, dir, off+boltPageHeader, native.AppendUint64(nil, m.root)) // the root page, listed as free
	wantCorrupt(t, dir, fmt.Sprintf("lists page %d, which is in use", m.root))
}

// TestIndexBytesFlipped is a small seeded fuzz: a few bytes of a few
// pages of the tree flipped. Whatever the damage, nothing may crash; the
// store is refused with a clear error or opens (Check then reports what
// it sees).
func TestIndexBytesFlipped(t *testing.T) {
	base := damageBase(t)
	m, used := indexLayout(t, filepath.Join(base, IndexFile))
	var tree []int64
	for id, u := range used {
		if u && id >= 2 {
			tree = append(tree, int64(id))
		}
	}
	ps := int64(m.pageSize)
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 9))
			dir := copyStore(t, base)
			for range 1 + r.IntN(4) {
				page := tree[r.IntN(len(tree))]
				// Mostly the header and element array, where the offsets are.
				off := page*ps + int64(r.IntN(256))
				if r.IntN(3) == 0 {
					off = page*ps + r.Int64N(ps)
				}
				writeAt(t, dir, off, []byte{byte(1 + r.IntN(255))})
			}
			code, out := runDamagedChild(t, dir, "use")
			if code == 1 && !strings.Contains(out, "open store") {
				t.Errorf("child refused the store without saying so:\n%s", out)
			}
		})
	}
}

// TestIndexDamagedWhileOpen cuts index.db short under an open store, as a
// failing disk or another program can: the first call to touch a page
// beyond the end faults (SIGBUS). Read first or write first, the call
// fails with ErrIndexCorrupt, the store turns read-only (later changes
// get ErrReadOnly) and Close returns: nothing crashes or hangs.
func TestIndexDamagedWhileOpen(t *testing.T) {
	base := damageBase(t)
	for _, steps := range []string{"truncate-then-read", "truncate-then-write"} {
		t.Run(steps, func(t *testing.T) {
			dir := copyStore(t, base)
			code, out := runDamagedChild(t, dir, steps)
			first, second := "read: ", "write: "
			if steps == "truncate-then-write" {
				first, second = second, first
			}
			for _, want := range []string{
				first + "index is damaged: " + filepath.Join(dir, IndexFile),
				"read-only: store is read-only since ",
				"index damage found during a transaction",
				"close: <nil>",
			} {
				if code != 0 || !strings.Contains(out, want) {
					t.Errorf("child: exit %d, output lacks %q:\n%s", code, want, out)
				}
			}
			if steps == "truncate-then-read" && !strings.Contains(out, "write: store is read-only") {
				t.Errorf("a write after the damage was not refused as read-only:\n%s", out)
			}
			if strings.Count(out, "store is read-only from now on") != 1 {
				t.Errorf("want the read-only line logged once:\n%s", out)
			}
			if steps == "truncate-then-read" && (strings.Count(out, "index damage found") != 3 || strings.Count(out, "stack=") != 1) {
				t.Errorf("three damaged reads: want a damage line each, only the first with the stack:\n%s", out)
			}
		})
	}
}

// TestIndexDamagedWhileOpenRefusedWrite: a write refused inside its
// transaction (a tombstone of a missing generation) on an index damaged
// while open, in a page the write does not read, is rolled back; the
// rollback walks every page (NoFreelistSync) and must not crash the
// process. The refusal stands, and the damage is found then or by the
// next read.
func TestIndexDamagedWhileOpenRefusedWrite(t *testing.T) {
	base := damageBase(t)
	m, used := indexLayout(t, filepath.Join(base, IndexFile))
	data, err := os.ReadFile(filepath.Join(base, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(m.pageSize)
	// The leases bucket's leaf page that holds clone-150's record, which
	// the read after the write walks (Info counts the leases). Its name
	// alone is also a key in generation_leases, which Info does not read:
	// matching the name only picked either page, by the layout of the run;
	// in leases the name is followed by its row (format, state Reserved),
	// in generation_leases by the next name.
	page := int64(-1)
	for id := int64(2); id < int64(m.pgid); id++ {
		p := data[id*ps : (id+1)*ps]
		if used[id] && native.Uint16(p[8:]) == boltLeafPage && bytes.Contains(p, []byte("clone-150\x01\x01")) {
			page = id
		}
	}
	if page < 0 {
		t.Fatal("no leaf page of the leases bucket")
	}
	dir := copyStore(t, base)
	t.Setenv("STORE_TEST_CHILD_PAGE", fmt.Sprint(page))
	code, out := runDamagedChild(t, dir, "zero-page-then-refused-write")
	for _, want := range []string{"refused write: ", "not found", "read-only: store is read-only since ", "close: <nil>"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("child: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}

// TestRestoreDamagedSnapshot: Restore reads the backup's store.db; a
// damaged one is ErrIndexCorrupt and nothing is created.
func TestRestoreDamagedSnapshot(t *testing.T) {
	base := damageBase(t)
	m, _ := indexLayout(t, filepath.Join(base, IndexFile))
	snapshot := filepath.Join(copyStore(t, base), IndexFile)
	if err := os.Truncate(snapshot, int64(m.pgid-1)*int64(m.pageSize)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	err := Restore(dir, snapshot, func(Generation, Artifact) (*os.File, error) { return nil, os.ErrNotExist })
	if !errors.Is(err, ErrIndexCorrupt) || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("Restore from a truncated snapshot = %v, want ErrIndexCorrupt", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore left %s: %v", dir, err)
	}
}

// TestCheckOneMetaPageGarbled: random bytes over the older meta page
// (its page id garbled too) are one problem, which says what rewrites the
// page, not a second line with the panic of bbolt's page check.
func TestCheckOneMetaPageGarbled(t *testing.T) {
	base := damageBase(t)
	for _, off := range []int64{0, 4096} {
		dir := copyStore(t, base)
		garbage := bytes.Repeat([]byte{0xa5, 0x5a, 0x3c, 0xc3}, 1024)
		writeAt(t, dir, off, garbage)
		st, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler), NoRecover: true})
		if err != nil {
			t.Fatalf("meta page at %d garbled: Open: %v", off, err)
		}
		problems, err := st.Check(CheckOptions{})
		st.Close()
		if err != nil {
			t.Fatalf("meta page at %d garbled: Check: %v", off, err)
		}
		var index []Problem // the newer page garbled also loses its commit's payload-ahead
		for _, p := range problems {
			if p.Kind == ProblemIndex {
				index = append(index, p)
			}
		}
		if len(index) != 1 || !strings.Contains(index[0].Detail, "the next change to the store (a lease, a publication, a settings change) rewrites this one") {
			t.Errorf("meta page at %d garbled: Check = %v; want one index problem saying what rewrites the page", off, problems)
		}
		for _, p := range problems {
			if strings.Contains(p.String(), "panic") {
				t.Errorf("meta page at %d garbled: problem %q shows bbolt's panic", off, p)
			}
		}
	}
}
