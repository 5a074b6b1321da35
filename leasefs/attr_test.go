package leasefs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

func TestAttr(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	g1, g2 := fx.gens[1], fx.gens[2]
	c1, err := fx.st.Lease("c1")
	if err != nil {
		t.Fatal(err)
	}
	info, err := fx.st.Info()
	if err != nil {
		t.Fatal(err)
	}
	// A status file's mtime is its record's last change: the state, or
	// the lease set (the fixture acquires leases after publishing).
	changed := func(i int) time.Time {
		g, err := fx.st.Generation(fx.gens[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		leases, err := fx.st.LeasesChangedAt(g.ID)
		if err != nil {
			t.Fatal(err)
		}
		return latest(g.LastChange(), leases)
	}
	tests := []struct {
		path  string
		mode  fs.FileMode
		nlink uint32
		mtime time.Time
		ctime time.Time
	}{
		{".", fs.ModeDir | 0o555, 8, info.CreatedAt, info.CreatedAt},
		{"store", 0o444, 1, info.ChangedAt, info.ChangedAt},
		{"keys", fs.ModeDir | 0o555, 1, info.CreatedAt, info.CreatedAt},
		{"keys/KEY", fs.ModeDir | 0o555, 3, g1.PublishedAt, g1.PublishedAt},
		{"keys/KEY/leases", fs.ModeDir | 0o755, 2, g1.PublishedAt, g1.PublishedAt},
		{"keys/KEY/key", 0o444, 1, g1.PublishedAt, g1.PublishedAt},
		{"keys/KEY/generations", 0o444, 1, fx.gens[5].PublishedAt, fx.gens[5].PublishedAt},
		{"generations", fs.ModeDir | 0o555, 1, info.CreatedAt, info.CreatedAt},
		{"tombstones", fs.ModeDir | 0o555, 1, info.CreatedAt, info.CreatedAt},
		{"retiring", fs.ModeDir | 0o555, 1, info.CreatedAt, info.CreatedAt},
		{"leases", fs.ModeDir | 0o755, 2, info.CreatedAt, info.CreatedAt},
		{"generations/g000001", fs.ModeDir | 0o555, 4, g1.PublishedAt, g1.PublishedAt},
		{"tombstones/g000002", fs.ModeDir | 0o555, 4, g2.PublishedAt, g2.Tombstone.At},
		{"generations/g000001/manifest", 0o444, 1, g1.PublishedAt, g1.PublishedAt},
		{"generations/g000001/status", 0o444, 1, changed(1), changed(1)},
		{"tombstones/g000002/status", 0o444, 1, changed(2), changed(2)},
		{"retiring/g000005/status", 0o444, 1, changed(5), changed(5)},
		{"retiring/g000005", fs.ModeDir | 0o555, 4, fx.gens[5].PublishedAt, fx.gens[5].Tombstone.At},
		{"generations/g000001/ctl", 0o644, 1, g1.PublishedAt, g1.PublishedAt},
		{"tombstones/g000002/ctl", 0o644, 1, g2.PublishedAt, g2.PublishedAt},
		{"generations/g000001/payload", fs.ModeDir | 0o555, 2, g1.PublishedAt, g1.PublishedAt},
		{"generations/g000001/payload/memory.bin", 0o444, 1, g1.PublishedAt, g1.PublishedAt},
		{"generations/g000001/leases", fs.ModeDir | 0o755, 2, g1.PublishedAt, g1.PublishedAt},
		{"generations/g000001/leases/c1", 0o644, 3, c1.CreatedAt, c1.CreatedAt},
		{"leases/c1", 0o644, 3, c1.CreatedAt, c1.CreatedAt},
		{"keys/KEY/leases/c1", 0o644, 3, c1.CreatedAt, c1.CreatedAt},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			a, err := fx.fs.Attr(fx.walk(tt.path))
			if err != nil {
				t.Fatal(err)
			}
			if a.Mode != tt.mode || a.Nlink != tt.nlink {
				t.Errorf("mode %v nlink %d, want %v %d", a.Mode, a.Nlink, tt.mode, tt.nlink)
			}
			if !a.Mtime.Equal(tt.mtime) || !a.Ctime.Equal(tt.ctime) || !a.Atime.Equal(tt.mtime) {
				t.Errorf("atime %v mtime %v ctime %v, want %v %v", a.Atime, a.Mtime, a.Ctime, tt.mtime, tt.ctime)
			}
			if a.UID != uint32(os.Geteuid()) || a.Blksize <= 0 {
				t.Errorf("uid %d blksize %d, want %d and > 0", a.UID, a.Blksize, os.Geteuid())
			}
			if a.Mtime.IsZero() {
				t.Error("zero mtime")
			}
		})
	}
}

// TestTextSizes: every text file's size is the length of what Open
// returns, and Open renders current state.
func TestTextSizes(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for p, n := range fx.walkTree() {
		if n.IsDir() || n.Kind() == KindPayloadFile || n.Kind() == KindIndexFile || n.Kind() == KindEventsFile {
			continue // backing files: TestPayloadAttr, TestIndexFile; a stream: TestEvents
		}
		a, err := fx.fs.Attr(n)
		if err != nil {
			t.Fatal(err)
		}
		h, err := fx.fs.Open(n, OpenFlags{}, owner)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if int64(len(h.Data)) != a.Size || a.Size == 0 || a.Blocks != (a.Size+511)/512 {
			t.Errorf("%s: size %d blocks %d, content %d bytes", p, a.Size, a.Blocks, len(h.Data))
		}
	}
}

// TestPayloadAttr: payload files are byte-identical to the capture and
// report the backing file's allocation, so sparse memory.bin stays sparse.
func TestPayloadAttr(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for _, name := range []string{manifest.ManifestFileName, manifest.StateFileName, manifest.MemoryFileName} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(fx.captures.fresh, name))
			if err != nil {
				t.Fatal(err)
			}
			n := fx.walk("tombstones/g000002/payload/" + name)
			a, err := fx.fs.Attr(n)
			if err != nil {
				t.Fatal(err)
			}
			h, err := fx.fs.Open(n, OpenFlags{}, owner)
			if err != nil {
				t.Fatal(err)
			}
			defer h.File.Close()
			got, err := io.ReadAll(h.File)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || a.Size != int64(len(want)) {
				t.Errorf("payload %d bytes (attr %d), capture %d bytes, equal %v", len(got), a.Size, len(want), bytes.Equal(got, want))
			}
			if name == manifest.MemoryFileName && a.Blocks*512 >= a.Size/4 {
				t.Errorf("memory.bin: %d blocks for %d bytes, want sparse", a.Blocks, a.Size)
			}
			if name == manifest.StateFileName && a.Blocks*512 < a.Size {
				t.Errorf("state.bin: %d blocks for %d bytes, want dense", a.Blocks, a.Size)
			}
		})
	}
}

func TestRender(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	read := func(path string) string {
		t.Helper()
		h, err := fx.fs.Open(fx.walk(path), OpenFlags{}, owner)
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		return string(h.Data)
	}
	info, _ := fx.st.Info()

	t.Run("store", func(t *testing.T) {
		got := read("store")
		for _, line := range []string{
			"store_id: " + info.StoreID, "restored_from: none", "schema_identity: templatefs-store", fmt.Sprintf("schema_version: %d", store.SchemaVersion),
			"generations: 5", "published: 3", "tombstoned: 1", "retiring: 1", "keys: 1", "leases: 3",
			"restore_window: 720h0m0s", "refuse_reboot: false", "refuse_other_host: false", "read_only: no",
		} {
			if !strings.Contains(got, line+"\n") {
				t.Errorf("store lacks %q:\n%s", line, got)
			}
		}
	})
	t.Run("key", func(t *testing.T) {
		got := read("keys/KEY/key")
		if templatekey.IDOf([]byte(got)) != fx.gens[1].KeyID {
			t.Errorf("key text does not hash to its ID %s:\n%s", fx.gens[1].KeyID, got)
		}
	})
	t.Run("key generations", func(t *testing.T) {
		if got, want := read("keys/KEY/generations"), "g000005\ng000004\ng000003\ng000002\ng000001\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("manifest", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(fx.captures.fresh, manifest.ManifestFileName))
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := read("generations/g000001/manifest"); got != m.Text() || got == "" {
			t.Errorf("manifest text differs from manifest.Decode(capture).Text()")
		}
	})
	status := func(i int, lines ...string) string {
		g := fx.gens[i]
		ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
		head := []string{"state: " + string(g.State), "generation: " + g.ID.String(), "key_id: " + g.KeyID,
			"fleet_id: " + g.FleetID(), "published_at: " + ts(g.PublishedAt), "captured_at: " + ts(g.CaptureTime)}
		if g.Tombstone != nil {
			head = append(head, "tombstoned_at: "+ts(g.Tombstone.At), fmt.Sprintf("tombstoned_by_uid: %d", g.Tombstone.UID))
		}
		if g.Retirement != nil {
			head = append(head, "retiring_at: "+ts(g.Retirement.At), fmt.Sprintf("retiring_by_uid: %d", g.Retirement.UID))
		}
		return strings.Join(append(head, lines...), "\n") + "\n"
	}
	ends := func(i int) string {
		return "window_ends_at: " + fx.gens[i].Anchors.UTC.Add(store.MaxRestoreWindow).Format(time.RFC3339Nano)
	}
	tests := []struct {
		path, want string
	}{
		{"generations/g000001/status", status(1, "leases: 1", "eligible: true", "eligibility_rule: utc",
			"restore_window: 720h0m0s", ends(1), "new_leases: granted", "last_refusal: none")},
		{"generations/g000004/status", status(4, "leases: 0", "eligible: false", "eligibility_rule: utc",
			"restore_window: 720h0m0s", ends(4), "new_leases: refused (EPERM): ineligible: restore window of 720h0m0s ended at "+
				fx.gens[4].Anchors.UTC.Add(store.MaxRestoreWindow).Format(time.RFC3339Nano), "last_refusal: none")},
		{"tombstones/g000002/status", status(2, "leases: 1", "eligible: true", "eligibility_rule: utc",
			"restore_window: 720h0m0s", ends(2), "new_leases: refused (EPERM): generation is tombstoned", "last_refusal: none")},
		{"retiring/g000005/status", status(5, "leases: 1", "eligible: true", "eligibility_rule: utc",
			"restore_window: 720h0m0s", ends(5), "new_leases: refused (EPERM): generation is retiring", "last_refusal: none")},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := read(tt.path); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	t.Run("ctl", func(t *testing.T) {
		if got, want := read("tombstones/g000002/ctl"), "tombstone\nlift\nretire\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("lease", func(t *testing.T) {
		got := read("generations/g000001/leases/c1")
		if read("leases/c1") != got || read("keys/KEY/leases/c1") != got || !strings.HasSuffix(got, "}\n") || strings.Count(got, "\n") != 1 {
			t.Fatalf("lease file is not one JSON line, or differs between its names: %q", got)
		}
		l, err := fx.st.Lease("c1")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(l)
		if got != string(want)+"\n" {
			t.Errorf("lease file %s, store record %s", got, want)
		}
	})
	t.Run("renders current state", func(t *testing.T) {
		fx.acquire(3, "fresh")
		if got := read("store"); !strings.Contains(got, "leases: 4\n") {
			t.Errorf("store after a new lease:\n%s", got)
		}
	})
}

// TestStatusMtimeWindowEnded: a status file whose restore window ended
// after its last change has the window's end as its mtime, the moment
// its verdict flipped, measured by the host clock eligibility uses.
func TestStatusMtimeWindowEnded(t *testing.T) {
	now := hostclock.Now().UTC().Truncate(time.Second)
	capture := capturetest.Make(t, t.TempDir(), manifest.SampleOptions{StateSizeBytes: 3000, MemorySizeBytes: 4 << 20,
		CaptureUTC: now.Add(-31 * 24 * time.Hour)})
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	published := now.Add(-2 * 24 * time.Hour) // inside the window, which ended a day ago
	st, err := store.Open(dir, store.Options{Logger: quiet, Now: func() time.Time { return published }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	class := templatekey.SampleClass()
	g, err := st.Publish(capture, &class)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(st, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.Eligibility(g.ID)
	if err != nil || e.Eligible || e.Rule != store.RuleUTC {
		t.Fatalf("Eligibility = %+v, %v; want ineligible by the UTC rule", e, err)
	}
	end := g.Anchors.UTC.Add(e.Window)
	if !end.After(published) || end.After(now) {
		t.Fatalf("window ends %v, want between the publication %v and now %v", end, published, now)
	}
	n, err := f.Walk("generations/" + g.ID.String() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Attr(n)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Mtime.Equal(end) {
		t.Errorf("status mtime %v, want the end of the restore window %v", a.Mtime, end)
	}
}
