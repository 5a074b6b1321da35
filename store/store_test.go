package store_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"templatefs/internal/sample"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// TestMain lets a test re-run this binary as a child that publishes one
// capture, so crash tests can SIGKILL a real process at a fail point.
func TestMain(m *testing.M) {
	if dir := os.Getenv("STORE_TEST_CHILD_PUBLISH"); dir != "" {
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			panic(err)
		}
		class := templatekey.SampleClass()
		if _, err := st.Publish(os.Getenv("STORE_TEST_CHILD_CAPTURE"), &class); err != nil {
			panic(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func sampleOptions(version uint32, memory uint64) manifest.SampleOptions {
	return manifest.SampleOptions{
		Version:            version,
		MemorySizeBytes:    memory,
		StateSizeBytes:     4096,
		VPCount:            2,
		CaptureUTC:         captureUTC,
		CaptureMonotonicNs: 123e9,
		HostID:             [16]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		BootID:             [16]byte{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
		HostClock:          "linux-boottime",
	}
}

func makeCapture(t *testing.T, memory uint64, seed uint64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture")
	if err := sample.WriteCapture(dir, sampleOptions(6, memory), seed); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newStore(t *testing.T) (string, *store.Store) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	// A fixture host keeps the sample captures eligible whatever the date.
	st, err := store.Open(dir, store.Options{Host: sampleHost()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return dir, st
}

func publish(t *testing.T, st *store.Store, capture string) store.Generation {
	t.Helper()
	class := templatekey.SampleClass()
	g, err := st.Publish(capture, &class)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestInitOpenInfo(t *testing.T) {
	dir, st := newStore(t)
	info, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.SchemaIdentity != store.SchemaIdentity || info.SchemaVersion != store.SchemaVersion {
		t.Errorf("schema %q v%d, want %q v%d", info.SchemaIdentity, info.SchemaVersion, store.SchemaIdentity, store.SchemaVersion)
	}
	if len(info.StoreID) != 32 || strings.Trim(info.StoreID, "0") == "" {
		t.Errorf("store ID %q: want 32 hex digits, not all zero", info.StoreID)
	}
	if err := store.Init(dir); !errors.Is(err, store.ErrExists) {
		t.Errorf("Init of an existing store: got %v, want ErrExists", err)
	}
	_, err = store.Open(dir, store.Options{})
	if !errors.Is(err, store.ErrStoreInUse) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("second Open: got %v, want ErrStoreInUse naming pid %d", err, os.Getpid())
	}
}

// writeMeta makes a store whose index meta bucket is replaced by rows.
func writeMeta(t *testing.T, rows map[string][]byte, dropMeta bool) string {
	t.Helper()
	dir, st := newStore(t)
	st.Close()
	db, err := bolt.Open(filepath.Join(dir, store.IndexFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if dropMeta {
			return tx.DeleteBucket([]byte("meta"))
		}
		meta := tx.Bucket([]byte("meta"))
		for k, v := range rows {
			if v == nil {
				if err := meta.Delete([]byte(k)); err != nil {
					return err
				}
				continue
			}
			if err := meta.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	return dir
}

func TestOpenRefusesSchema(t *testing.T) {
	version := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	tests := []struct {
		name     string
		rows     map[string][]byte
		dropMeta bool
		want     error
		mention  string
	}{
		{"no meta bucket", nil, true, store.ErrSchemaUnknown, "meta"},
		{"no identity", map[string][]byte{"identity": nil}, false, store.ErrSchemaUnknown, "no schema identity"},
		{"other identity", map[string][]byte{"identity": []byte("containerd")}, false, store.ErrSchemaUnknown, "containerd"},
		{"unversioned", map[string][]byte{"version": nil}, false, store.ErrSchemaUnversioned, "0 bytes"},
		{"older", map[string][]byte{"version": version(0)}, false, store.ErrSchemaTooOld, "version 0"},
		{"newer", map[string][]byte{"version": version(store.SchemaVersion + 1)}, false, store.ErrSchemaTooNew, fmt.Sprintf("version %d", store.SchemaVersion+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeMeta(t, tt.rows, tt.dropMeta)
			st, err := store.Open(dir, store.Options{})
			if err == nil {
				st.Close()
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("got %v, want %v mentioning %q", err, tt.want, tt.mention)
			}
		})
	}
}

func TestOpenRefusesUnsafePaths(t *testing.T) {
	tests := []struct {
		name    string
		spoil   func(t *testing.T, dir string) string // returns the path the error must name
		mention string
	}{
		{"world-writable root", func(t *testing.T, dir string) string {
			os.Chmod(dir, 0o777)
			return dir
		}, "writable"},
		{"group-writable payload", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, store.PayloadDir)
			os.Chmod(p, 0o770)
			return p
		}, "writable"},
		{"symlink in payload", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, store.PayloadDir, "g000001")
			if err := os.Symlink("/etc", p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "symbolic link"},
		{"store root is a symlink", func(t *testing.T, dir string) string {
			link := dir + "-link"
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "symbolic link"},
		{"foreign owner", func(t *testing.T, dir string) string {
			if os.Geteuid() != 0 {
				t.Skip("chown to another uid needs root")
			}
			p := filepath.Join(dir, store.StagingDir)
			if err := os.Chown(p, 4242, 4242); err != nil {
				t.Fatal(err)
			}
			return p
		}, "uid 4242"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, st := newStore(t)
			st.Close()
			path := tt.spoil(t, dir)
			open := dir
			if strings.HasSuffix(path, "-link") {
				open = path
			}
			st, err := store.Open(open, store.Options{})
			if err == nil {
				st.Close()
			}
			if !errors.Is(err, store.ErrUnsafePath) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("got %v, want ErrUnsafePath naming %s (%s)", err, path, tt.mention)
			}
		})
	}
}

func TestPublishSparseAndDigests(t *testing.T) {
	const memory = 1 << 30
	capture := makeCapture(t, memory, 7)
	dir, st := newStore(t)
	g := publish(t, st, capture)
	if g.ID.String() != "g000001" || g.State != store.Published || g.ManifestVersion != 6 {
		t.Errorf("generation %+v: want g000001, published, manifest v6", g)
	}
	if len(g.Artifacts) != 3 || g.Artifacts[0].Name != "manifest.bin" {
		t.Fatalf("artifacts %+v: want manifest.bin first of 3", g.Artifacts)
	}
	for _, a := range g.Artifacts {
		src := filepath.Join(capture, a.Name)
		dst := filepath.Join(dir, store.PayloadDir, g.ID.String(), a.Name)
		if want := fileSHA256(t, src); a.SHA256 != want || fileSHA256(t, dst) != want {
			t.Errorf("%s: record digest %s, payload %s, capture %s", a.Name, a.SHA256, fileSHA256(t, dst), want)
		}
	}
	checkMemoryCopy(t, filepath.Join(dir, store.PayloadDir, g.ID.String(), "memory.bin"), memory, memory/sample.DataStride*sample.DataBlock)
	if got, err := st.Generation(g.ID); err != nil || got.KeyID != g.KeyID {
		t.Errorf("Generation(%s) = %+v, %v", g.ID, got, err)
	}
	g2 := publish(t, st, makeCapture(t, memory, 8))
	ids, err := st.KeyGenerations(g.KeyID)
	if err != nil || len(ids) != 2 || ids[0] != g2.ID || ids[1] != g.ID {
		t.Errorf("KeyGenerations = %v, %v; want [%s %s] (newest first)", ids, err, g2.ID, g.ID)
	}
}

// assertEmptyStore checks that a refused or crashed publication left
// nothing: no record, no payload, nothing in staging.
func assertEmptyStore(t *testing.T, dir string, st *store.Store) {
	t.Helper()
	gens, err := st.Generations()
	if err != nil || len(gens) != 0 {
		t.Errorf("generations %v, %v: want none", gens, err)
	}
	for _, sub := range []string{store.PayloadDir, store.StagingDir} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil || len(entries) != 0 {
			t.Errorf("%s holds %v (%v): want nothing", sub, entries, err)
		}
	}
}

func TestPublishRefusalLeavesStoreUnchanged(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, capture string)
		want  error
	}{
		{"extra file", func(t *testing.T, c string) {
			os.WriteFile(filepath.Join(c, "notes.txt"), []byte("x"), 0o600)
		}, manifest.ErrUnexpectedArtifact},
		{"missing state", func(t *testing.T, c string) { os.Remove(filepath.Join(c, "state.bin")) }, manifest.ErrIncompleteCapture},
		{"short memory", func(t *testing.T, c string) { os.Truncate(filepath.Join(c, "memory.bin"), 4096) }, manifest.ErrArtifactSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			capture := makeCapture(t, 16<<20, 1)
			tt.spoil(t, capture)
			dir, st := newStore(t)
			class := templatekey.SampleClass()
			_, err := st.Publish(capture, &class)
			if !errors.Is(err, store.ErrCapture) || !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want ErrCapture wrapping %v", err, tt.want)
			}
			assertEmptyStore(t, dir, st)
		})
	}
}

// TestPublishCrashLeavesNoGeneration kills a real publishing process at
// each publication fail point, reopens the store and checks that no
// generation is visible, the leftovers are gone, and the next publication
// gets an ID that was never handed out.
func TestPublishCrashLeavesNoGeneration(t *testing.T) {
	capture := makeCapture(t, 16<<20, 3)
	points := []string{"publish-reserved", "publish-copied-manifest.bin", "publish-copied-state.bin", "publish-copied-memory.bin", "publish-renamed"}
	for i, point := range points {
		t.Run(point, func(t *testing.T) {
			dir, st := newStore(t)
			st.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "STORE_TEST_CHILD_PUBLISH="+dir, "STORE_TEST_CHILD_CAPTURE="+capture, store.FailpointEnv+"="+point)
			err := cmd.Run()
			if !diedAtFailpoint(err) {
				t.Fatalf("child: got %v, want death by SIGKILL at %s", err, point)
			}
			if i >= 1 {
				// The crash came after files were written: leftovers must exist before recovery.
				left, _ := os.ReadDir(filepath.Join(dir, store.StagingDir))
				orphans, _ := os.ReadDir(filepath.Join(dir, store.PayloadDir))
				if len(left)+len(orphans) == 0 {
					t.Fatalf("no leftovers after a crash at %s: the fail point fired too early", point)
				}
			}
			st, err = store.Open(dir, store.Options{Host: sampleHost()})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			assertEmptyStore(t, dir, st)
			if g := publish(t, st, capture); g.ID != 2 {
				t.Errorf("publication after crash got ID %s, want g000002 (g000001 was reserved)", g.ID)
			}
		})
	}
}

func TestLeases(t *testing.T) {
	_, st := newStore(t)
	g1 := publish(t, st, makeCapture(t, 16<<20, 1))
	g2 := publish(t, st, makeCapture(t, 16<<20, 2))

	l, created, err := st.AcquireLease(g1.ID, "clone-a")
	if err != nil || !created || l.State != store.Reserved || l.Generation != g1.ID || l.KeyID != g1.KeyID || len(l.LaunchID) != 32 {
		t.Fatalf("AcquireLease = %+v, %v, %v", l, created, err)
	}
	again, created, err := st.AcquireLease(g1.ID, "clone-a")
	if err != nil || created || again != l {
		t.Errorf("retry = %+v, %v, %v; want the same lease, not created", again, created, err)
	}
	if _, _, err := st.AcquireLease(g2.ID, "clone-a"); !errors.Is(err, store.ErrLeaseConflict) {
		t.Errorf("same clone on another generation: got %v, want ErrLeaseConflict", err)
	}
	l2, _, err := st.AcquireLease(g2.ID, "clone-b")
	if err != nil || l2.Seq <= l.Seq {
		t.Errorf("second lease %+v, %v: want a larger sequence than %d", l2, err, l.Seq)
	}
	for _, bad := range []string{"", ".hidden", "-x", "a/b", "a b", strings.Repeat("x", store.MaxCloneIDLen+1)} {
		if _, _, err := st.AcquireLease(g1.ID, bad); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("clone ID %q: got %v, want ErrInvalidID", bad, err)
		}
	}
	if _, _, err := st.AcquireLease(99, "clone-c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown generation: got %v, want ErrNotFound", err)
	}

	tg, err := st.Tombstone(g1.ID, 1000)
	if err != nil || tg.State != store.Tombstoned || tg.Tombstone == nil || tg.Tombstone.UID != 1000 {
		t.Fatalf("Tombstone = %+v, %v", tg, err)
	}
	if again, err := st.Tombstone(g1.ID, 0); err != nil || again.Tombstone.UID != 1000 {
		t.Errorf("second Tombstone = %+v, %v; want the first record unchanged", again, err)
	}
	if _, _, err := st.AcquireLease(g1.ID, "clone-c"); !errors.Is(err, store.ErrTombstoned) {
		t.Errorf("lease on tombstoned generation: got %v, want ErrTombstoned", err)
	}
	if kept, created, err := st.AcquireLease(g1.ID, "clone-a"); err != nil || created || kept != l {
		t.Errorf("existing lease after tombstone = %+v, %v, %v; want it unchanged", kept, created, err)
	}
	held, err := st.GenerationLeases(g1.ID)
	if err != nil || len(held) != 1 || held[0].CloneID != "clone-a" {
		t.Errorf("GenerationLeases = %+v, %v", held, err)
	}
	if err := st.CancelLease("clone-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lease("clone-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("released lease: got %v, want ErrNotFound", err)
	}
	if held, _ := st.GenerationLeases(g1.ID); len(held) != 0 {
		t.Errorf("GenerationLeases after release = %+v, want none", held)
	}
	if err := st.ReleaseLease("clone-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second release: got %v, want ErrNotFound", err)
	}
}

func TestLeaseSurvivesReopen(t *testing.T) {
	dir, st := newStore(t)
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	l, _, err := st.AcquireLease(g.ID, "clone-a")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = store.Open(dir, store.Options{Host: sampleHost()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Lease("clone-a")
	if err != nil || got != l {
		t.Errorf("after reopen: %+v, %v; want %+v", got, err, l)
	}
}

func TestParseGenerationID(t *testing.T) {
	for _, s := range []string{"g000001", "g123456", "g1234567"} {
		id, err := store.ParseGenerationID(s)
		if err != nil || id.String() != s {
			t.Errorf("ParseGenerationID(%q) = %v, %v", s, id, err)
		}
	}
	for _, s := range []string{"", "g1", "g000000", "G000001", "g0000001", "g00000a", "000001", "g-00001"} {
		if _, err := store.ParseGenerationID(s); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("ParseGenerationID(%q): got %v, want ErrInvalidID", s, err)
		}
	}
}
