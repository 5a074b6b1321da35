//go:build linux

// Package backup backs the mount up with the real tools (GNU tar, rsync,
// restic, borg) and checks what project issue 5 asks: sparse payloads
// round-trip with their digests, a second backup of an unchanged mount
// (across a daemon restart) adds nothing, and `templatefs restore`
// rebuilds a store from a backup, refusing a damaged one.
package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/fs"
	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/leasefs"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
	"templatefs/tests/harness"
)

// need returns the path of tool, or skips (fails under
// harness.RequireFUSEEnv=1, as in CI).
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		harness.SkipOrFail(t, "%s not installed: %v", tool, err)
	}
	return p
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a store with three generations (published with lease c1,
// published, tombstoned with lease c2), each with a sparse 16 MiB
// memory.bin, mounted at mnt by this process.
type env struct {
	t    *testing.T
	dir  string
	mnt  string
	gens []store.Generation
	st   *store.Store
	srv  *fuse.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	harness.RequireFUSE(t)
	e := &env{t: t, dir: filepath.Join(t.TempDir(), "store"), mnt: t.TempDir()}
	if err := store.Init(e.dir); err != nil {
		t.Fatal(err)
	}
	e.open()
	class := templatekey.SampleClass()
	capture := capturetest.Make(t, t.TempDir(), manifest.SampleOptions{StateSizeBytes: 5000, MemorySizeBytes: 16 << 20, CaptureUTC: hostclock.Now()})
	for range 3 {
		g, err := e.st.Publish(capture, &class)
		if err != nil {
			t.Fatal(err)
		}
		e.gens = append(e.gens, g)
	}
	for i, clone := range map[int]string{0: "c1", 2: "c2"} {
		if _, _, err := e.st.AcquireLease(e.gens[i].ID, clone); err != nil {
			t.Fatal(err)
		}
	}
	g, err := e.st.Tombstone(e.gens[2].ID, uint32(os.Geteuid()))
	if err != nil {
		t.Fatal(err)
	}
	e.gens[2] = g
	e.mount()
	t.Cleanup(e.stop)
	return e
}

func (e *env) open() {
	e.t.Helper()
	st, err := store.Open(e.dir, store.Options{Logger: quiet})
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
}

func (e *env) mount() {
	e.t.Helper()
	lfs, err := leasefs.New(e.st, leasefs.Options{Logger: quiet})
	if err != nil {
		e.t.Fatal(err)
	}
	if e.srv, err = fs.Mount(e.mnt, lfs, fs.MountOptions{Logger: quiet}); err != nil {
		harness.SkipOrFail(e.t, "mount: %v", err)
	}
}

// stop unmounts and closes the store, as a daemon exit does.
func (e *env) stop() {
	if e.srv != nil {
		if err := e.srv.Unmount(); err != nil {
			e.t.Errorf("unmount: %v", err)
		}
		e.srv.Wait()
		e.srv = nil
	}
	if e.st != nil {
		e.st.Close()
		e.st = nil
	}
}

// restart stops the daemon and starts it again on the same store.
func (e *env) restart() {
	e.t.Helper()
	e.stop()
	e.open()
	e.mount()
}

// run runs a tool and returns its stdout, failing the test with its
// stderr on a non-zero exit.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// checkPayloads checks that tree (a copy of the mount) holds every
// artifact with the digest of its generation record, and that memory.bin
// stayed sparse (allocated far less than its size) when sparse is set.
func (e *env) checkPayloads(tree string, sparse bool) {
	e.t.Helper()
	for _, g := range e.gens {
		for _, a := range g.Artifacts {
			rel, err := leasefs.BackupPath(g, a.Name)
			if err != nil {
				e.t.Fatal(err)
			}
			p := filepath.Join(tree, rel)
			if got := digest(e.t, p); got != a.SHA256 {
				e.t.Errorf("%s: sha256 %s, want %s", rel, got, a.SHA256)
			}
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				e.t.Fatal(err)
			}
			if st.Size != a.Size {
				e.t.Errorf("%s: size %d, want %d", rel, st.Size, a.Size)
			}
			if sparse && a.Name == manifest.MemoryFileName && st.Blocks*512 >= a.Size/2 {
				e.t.Errorf("%s: %d bytes allocated of %d: not sparse", rel, st.Blocks*512, a.Size)
			}
		}
	}
}

func digest(t *testing.T, path string) string {
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

// templatefs builds the command once per test binary.
func templatefs(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "templatefs")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "build", "-o", bin, "templatefs/cmd/templatefs")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var binDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "templatefs-backup-test-")
	if err != nil {
		panic(err)
	}
	binDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// TestTarSparse: tar --sparse of the mount keeps memory.bin sparse and
// the digests, which `sha256sum -c SHA256SUMS` checks in each extracted
// generation directory without the mount; `templatefs restore` of the
// extracted tree gives a store that fsck --digests accepts, with the same
// generations and leases; a tree with one flipped byte is refused and
// leaves nothing behind.
func TestTarSparse(t *testing.T) {
	tar := need(t, "tar")
	e := newEnv(t)
	archive := filepath.Join(t.TempDir(), "mnt.tar")
	run(t, nil, tar, "--sparse", "-cf", archive, "-C", e.mnt, ".")
	tree := t.TempDir()
	run(t, nil, tar, "-xf", archive, "-C", tree)
	e.checkPayloads(tree, true)
	sha256sum := need(t, "sha256sum")
	for _, g := range e.gens {
		rel, err := leasefs.BackupPath(g, manifest.MemoryFileName)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sha256sum, "--strict", "-c", leasefs.SumsFileName)
		cmd.Dir = filepath.Join(tree, filepath.Dir(filepath.Dir(rel)))
		if out, err := cmd.CombinedOutput(); err != nil || strings.Count(string(out), ": OK\n") != len(g.Artifacts) {
			t.Errorf("extracted %s: sha256sum -c %s: %v: %s", cmd.Dir, leasefs.SumsFileName, err, out)
		}
	}
	mem, _ := e.gens[0].Artifact(manifest.MemoryFileName)
	rel, _ := leasefs.BackupPath(e.gens[0], mem.Name)

	bin := templatefs(t)
	restored := filepath.Join(t.TempDir(), "restored")
	run(t, nil, bin, "restore", tree, restored)
	run(t, nil, bin, "fsck", "--digests", restored)
	st, err := store.Open(restored, store.Options{Logger: quiet, NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Generations()
	if err != nil || len(got) != len(e.gens) || got[2].State != store.Tombstoned {
		t.Errorf("restored generations %+v, %v; want %d, the last tombstoned", got, err, len(e.gens))
	}
	if l, err := st.Lease("c2"); err != nil || l.Generation != e.gens[2].ID {
		t.Errorf("restored lease c2 = %+v, %v", l, err)
	}
	// A new store that names its source: the store_id the backed-up
	// MNT/store shows.
	source, err := os.ReadFile(filepath.Join(tree, "store"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info()
	if err != nil || info.RestoredFrom == "" || info.StoreID == info.RestoredFrom ||
		!strings.Contains(string(source), "store_id: "+info.RestoredFrom+"\n") {
		t.Errorf("restored store ID %s, restored from %q (%v); want a new ID, restored from the backup's:\n%s", info.StoreID, info.RestoredFrom, err, source)
	}
	st.Close()

	t.Run("damaged", func(t *testing.T) {
		p := filepath.Join(tree, rel)
		os.Chmod(p, 0o600)
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xff}, mem.Size/2+1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		parent := t.TempDir()
		out, err := exec.Command(bin, "restore", tree, filepath.Join(parent, "restored")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "backup does not match its index") || !strings.Contains(string(out), mem.SHA256) {
			t.Errorf("restore of a damaged backup: %v\n%s", err, out)
		}
		if left, _ := os.ReadDir(parent); len(left) != 0 {
			t.Errorf("a refused restore left %v in %s", left, parent)
		}
	})
}

// TestRsync: rsync -a copies the mount with the right digests, and a
// second rsync after a daemon restart transfers and changes nothing.
func TestRsync(t *testing.T) {
	rsync := need(t, "rsync")
	e := newEnv(t)
	dst := t.TempDir()
	run(t, nil, rsync, "-a", "--sparse", e.mnt+"/", dst+"/")
	e.checkPayloads(dst, true)
	e.restart()
	if out := run(t, nil, rsync, "-a", "--sparse", "--itemize-changes", e.mnt+"/", dst+"/"); strings.TrimSpace(out) != "" {
		t.Errorf("second rsync after a restart changed:\n%s", out)
	}
}

// TestRestic: a second backup of the unchanged mount finds every file
// unmodified, stores no new data and no changed metadata for anything in
// the mount; so does a third after a daemon restart, which keeps inode
// numbers, sizes and times. `restic diff --metadata` names what changed:
// the mountpoint's parent directories on the host (busy /tmp) may, since
// restic records them too. Restic 0.14 (Debian) also records st_dev, and
// the kernel gives each FUSE mount an anonymous device number that another
// mount may have taken meanwhile: only when it changed may the metadata of
// the mount's directories change across the restart.
func TestRestic(t *testing.T) {
	restic := need(t, "restic")
	e := newEnv(t)
	cache := t.TempDir()
	env := []string{"RESTIC_REPOSITORY=" + filepath.Join(t.TempDir(), "repo"), "RESTIC_PASSWORD=templatefs", "RESTIC_CACHE_DIR=" + cache}
	run(t, env, restic, "init")
	first := resticSummary(t, run(t, env, restic, "backup", "--json", e.mnt))
	if first.FilesNew == 0 || first.FilesNew != first.TotalFilesProcessed {
		t.Fatalf("first backup: %+v, want every file new", first)
	}
	prev := first.SnapshotID
	unchanged := func(what string, metadataMayChange bool) {
		t.Helper()
		got := resticSummary(t, run(t, env, restic, "backup", "--json", e.mnt))
		if got.FilesUnmodified != got.TotalFilesProcessed || got.FilesNew != 0 || got.FilesChanged != 0 || got.TotalFilesProcessed != first.TotalFilesProcessed {
			t.Errorf("%s: %+v, want all %d files unmodified", what, got, first.TotalFilesProcessed)
		}
		diff := run(t, env, restic, "diff", "--metadata", prev, got.SnapshotID)
		if !strings.Contains(diff, "Data Blobs:      0 new") {
			t.Errorf("%s stored new data:\n%s", what, diff)
		}
		for _, line := range strings.Split(diff, "\n") {
			if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[1], e.mnt) && !metadataMayChange {
				t.Errorf("%s: %q changed in the mount", what, line)
			}
		}
		prev = got.SnapshotID
	}
	unchanged("second backup", false)
	dev := func() uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(e.mnt, &st); err != nil {
			t.Fatal(err)
		}
		return st.Dev
	}
	before := dev()
	e.restart()
	after := dev()
	if before != after {
		t.Logf("the remount got device %#x, not %#x: restic records st_dev, so directory metadata may change", after, before)
	}
	unchanged("backup after a restart", before != after)
}

// resticStats is the summary line of `restic backup --json`.
type resticStats struct {
	MessageType         string `json:"message_type"`
	SnapshotID          string `json:"snapshot_id"`
	FilesNew            int    `json:"files_new"`
	FilesChanged        int    `json:"files_changed"`
	FilesUnmodified     int    `json:"files_unmodified"`
	DirsChanged         int    `json:"dirs_changed"`
	DataAdded           int64  `json:"data_added"`
	TotalFilesProcessed int    `json:"total_files_processed"`
}

func resticSummary(t *testing.T, out string) resticStats {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var s resticStats
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.MessageType == "summary" {
			return s
		}
	}
	t.Fatalf("no summary in restic output:\n%s", out)
	return resticStats{}
}

// TestBorg: a second `borg create` of the unchanged mount, after a daemon
// restart, stores no new file data and lists as added or modified only
// the files borg never trusts its cache for: those with the newest ctime of
// the first backup. Borg keeps a files-cache entry only when its ctime is
// older than the newest ctime seen in that backup (borg 1.2
// cache.py _write_files_cache: "avoid issues with filesystem snapshots and
// cmtime granularity"), so on any filesystem the newest file is read again.
func TestBorg(t *testing.T) {
	borg := need(t, "borg")
	e := newEnv(t)
	newest := e.newestCtimeFiles()
	repo := filepath.Join(t.TempDir(), "repo")
	env := []string{"BORG_BASE_DIR=" + t.TempDir(), "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes", "BORG_RELOCATED_REPO_ACCESS_IS_OK=yes"}
	run(t, env, borg, "init", "-e", "none", repo)
	first := borgStats(t, run(t, env, borg, "create", "--json", repo+"::first", e.mnt))
	e.restart()
	cmd := exec.Command(borg, "create", "--json", "--list", "--filter=AME", repo+"::second", e.mnt)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("borg create: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line == "" {
			continue
		}
		status, path, _ := strings.Cut(line, " ")
		if status != "A" || !newest[path] {
			t.Errorf("second borg create after a restart listed %q; only files of the newest ctime (%v) may be re-read", line, newest)
		}
	}
	second := borgStats(t, stdout.String())
	if second.Nfiles != first.Nfiles || second.DeduplicatedSize > maxBorgMetadata {
		t.Errorf("second archive: %+v, first %+v; want the same files and at most %d new bytes", second, first, maxBorgMetadata)
	}
}

// maxBorgMetadata bounds what a second borg archive of unchanged files may
// add: the chunk of its item-metadata stream that holds the re-read
// files' items (about 550 bytes here), never file data.
const maxBorgMetadata = 4096

// newestCtimeFiles returns the regular files of the mount with the newest
// ctime, by path.
func (e *env) newestCtimeFiles() map[string]bool {
	e.t.Helper()
	var newest int64
	out := map[string]bool{}
	err := filepath.WalkDir(e.mnt, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		switch ns := st.Ctim.Nano(); {
		case ns > newest:
			newest, out = ns, map[string]bool{p: true}
		case ns == newest:
			out[p] = true
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

type borgArchiveStats struct {
	Nfiles           int   `json:"nfiles"`
	DeduplicatedSize int64 `json:"deduplicated_size"`
	OriginalSize     int64 `json:"original_size"`
}

func borgStats(t *testing.T, out string) borgArchiveStats {
	t.Helper()
	var v struct {
		Archive struct {
			Stats borgArchiveStats `json:"stats"`
		} `json:"archive"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("borg --json output: %v\n%s", err, out)
	}
	return v.Archive.Stats
}

// TestStableAcrossRestart: inode numbers, mtimes and ctimes of every
// path of the mount are the same after a daemon restart.
func TestStableAcrossRestart(t *testing.T) {
	e := newEnv(t)
	before := e.statTree()
	e.restart()
	after := e.statTree()
	if len(after) != len(before) {
		t.Fatalf("%d paths after a restart, %d before", len(after), len(before))
	}
	for p, b := range before {
		a, ok := after[p]
		if !ok || a != b {
			t.Errorf("%s: before %+v, after %+v", p, b, a)
		}
	}
}

// stamp is what must not change across restarts.
type stamp struct {
	Ino          uint64
	Mtime, Ctime syscall.Timespec
}

func (e *env) statTree() map[string]stamp {
	e.t.Helper()
	out := map[string]stamp{}
	err := filepath.WalkDir(e.mnt, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.mnt, p)
		out[rel] = stamp{st.Ino, st.Mtim, st.Ctim}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out) < 40 {
		e.t.Fatalf("walked only %d paths of the mount", len(out))
	}
	return out
}
