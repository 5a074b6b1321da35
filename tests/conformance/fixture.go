//go:build linux

package conformance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/leasefs"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
	"templatefs/tests/harness"
)

// The test binary re-executes itself to mmap payloads: a page fault on a
// FUSE file blocks its OS thread, which must not be one of the threads
// serving the mount (go-fuse fs/api.go, "Deadlocks" 3). Main answers the
// re-executed child.
const (
	childEnv     = "TEMPLATEFS_FS_TEST_CHILD"
	childPathEnv = "TEMPLATEFS_FS_TEST_PATH"
	childWantEnv = "TEMPLATEFS_FS_TEST_WANT"
)

// MountOptions is what a case asks of the mount.
type MountOptions struct {
	// AllowOther lets other users access the mount (FUSE allow_other).
	AllowOther bool
	// Requests, if set, is incremented by the backend for every LOOKUP
	// and GETATTR request that reaches it, so a case can measure what the
	// kernel caches.
	Requests *atomic.Int64
	// GetXattrs and ListXattrs, if set, are incremented by the backend
	// for every GETXATTR and LISTXATTR request that reaches it.
	GetXattrs, ListXattrs *atomic.Int64
}

// MountFunc mounts lfs at the directory mnt with opts and returns once it
// serves; unmount unmounts it and returns after the server has stopped.
// An error means the backend could not mount here (the case is skipped,
// or fails under TEMPLATEFS_REQUIRE_FUSE=1).
type MountFunc func(lfs *leasefs.FS, mnt string, opts MountOptions) (unmount func() error, err error)

// Backend is one way of mounting leasefs, with what it cannot do.
type Backend struct {
	// Name names the backend in skip messages, e.g. "go-fuse".
	Name string
	// Mount mounts a leasefs.FS.
	Mount MountFunc
	// NoSeekData is set when lseek(SEEK_DATA/SEEK_HOLE) does not reach
	// the backing file (cgofuse has no lseek callback: the kernel treats
	// the whole file as data).
	NoSeekData bool
	// UncachedAttrs is set when the kernel caches no entries or
	// attributes, whatever the timeouts the backend asks for (cgofuse
	// over libfuse3 clears libfuse's config: docs/windows.md,
	// "Timeouts"); AttrCache then checks that every stat reaches the
	// backend instead of none.
	UncachedAttrs bool
	// MappableText is set when text, lease and ctl files are served
	// through the page cache, so mmap(2) of them works (cgofuse: libfuse3
	// opens them without direct_io), instead of failing with ENODEV.
	MappableText bool
	// NoFallocate is set when fallocate(2) never reaches the backend: the
	// kernel answers EOPNOTSUPP itself (libfuse3 has no fallocate callback
	// in cgofuse), so no refusal is logged.
	NoFallocate bool
}

// Main is TestMain for a package that calls Run: it serves the mmap child
// the suite re-executes the test binary as, else runs the tests.
func Main(m *testing.M) {
	if os.Getenv(childEnv) == "mmap" {
		if err := mmapChild(os.Getenv(childPathEnv), os.Getenv(childWantEnv)); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// env is a store with three published generations under one key, and
// lease c1 on g000001, mounted at mnt.
type env struct {
	t        *testing.T
	storeDir string
	capture  string
	gens     []store.Generation
	mnt      string
	st       *store.Store
	lfs      *leasefs.FS
	unmountF func() error // nil when not mounted
	backend  Backend
	log      *harness.SyncBuffer
	opts     MountOptions // what mount passes to the backend
}

func newEnv(t *testing.T, b Backend) *env {
	t.Helper()
	return newEnvWith(t, b, MountOptions{}, t.TempDir())
}

// newEnvWith is newEnv mounting at mnt with opts.
func newEnvWith(t *testing.T, b Backend, opts MountOptions, mnt string) *env {
	t.Helper()
	harness.RequireFUSE(t)
	e := newStoreEnv(t)
	e.opts, e.backend = opts, b
	e.mount(mnt)
	return e
}

// newStoreEnv makes the env's store, closed and not mounted.
func newStoreEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, storeDir: filepath.Join(t.TempDir(), "store"), log: &harness.SyncBuffer{}}
	// 64 MiB memory.bin with three 4 KiB data blocks, captured now so
	// generations are inside the restore window.
	o := manifest.SampleOptions{StateSizeBytes: 100_000, MemorySizeBytes: 64 << 20, CaptureUTC: hostclock.Now()}
	e.capture = capturetest.Make(t, t.TempDir(), o)
	if err := store.Init(e.storeDir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(e.storeDir, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	class := templatekey.SampleClass()
	for range 3 {
		g, err := st.Publish(e.capture, &class)
		if err != nil {
			t.Fatal(err)
		}
		e.gens = append(e.gens, g)
	}
	if _, _, err := st.AcquireLease(e.gens[0].ID, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return e
}

// open opens the store and its namespace, logging refusals to e.log.
func (e *env) open() (*store.Store, *leasefs.FS) {
	e.t.Helper()
	st, err := store.Open(e.storeDir, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	lfs, err := leasefs.New(st, leasefs.Options{Logger: slog.New(slog.NewTextHandler(e.log, nil))})
	if err != nil {
		st.Close()
		e.t.Fatal(err)
	}
	return st, lfs
}

// mount opens the store and mounts it at mnt; cleanup unmounts it.
func (e *env) mount(mnt string) {
	e.t.Helper()
	st, lfs := e.open()
	unmount, err := e.backend.Mount(lfs, mnt, e.opts)
	if err != nil {
		st.Close()
		harness.SkipOrFail(e.t, "%s: mount %s: %v", e.backend.Name, mnt, err)
	}
	e.mnt, e.st, e.lfs, e.unmountF = mnt, st, lfs, unmount
	e.t.Cleanup(e.unmount)
}

// unmount unmounts and closes the store; safe to call twice.
func (e *env) unmount() {
	if e.unmountF == nil {
		return
	}
	if err := e.unmountF(); err != nil {
		e.t.Errorf("unmount %s: %v", e.mnt, err)
	}
	if err := e.st.Close(); err != nil {
		e.t.Errorf("close store: %v", err)
	}
	e.unmountF, e.st = nil, nil
}

func (e *env) path(rel string) string { return filepath.Join(e.mnt, rel) }

func (e *env) lstat(rel string) *syscall.Stat_t {
	e.t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(e.path(rel), &st); err != nil {
		e.t.Fatalf("lstat %s: %v", rel, err)
	}
	return &st
}

func (e *env) names(rel string) []string {
	e.t.Helper()
	entries, err := os.ReadDir(e.path(rel))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range entries {
		out = append(out, d.Name())
	}
	return out
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

// dirent is one entry read with getdents64.
type dirent struct {
	ino  uint64
	typ  uint8
	name string
}

// readDirents lists dir with getdents64(2), which shows d_ino; "." and ".."
// are left out.
func readDirents(t *testing.T, dir string) []dirent {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dirent
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(int(f.Fd()), buf)
		if err != nil {
			t.Fatalf("getdents %s: %v", dir, err)
		}
		if n == 0 {
			return out
		}
		// struct linux_dirent64: u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, char d_name[].
		for off := 0; off < n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			name := string(buf[off+19 : off+reclen])
			name = name[:strings.IndexByte(name, 0)]
			if name != "." && name != ".." {
				out = append(out, dirent{ino: binary.NativeEndian.Uint64(buf[off:]), typ: buf[off+18], name: name})
			}
			off += reclen
		}
	}
}

// walk lists every path of the mount with its inode number from lstat,
// checking on the way that getdents' d_ino and d_type agree with lstat
// and with leasefs.
func (e *env) walk() map[string]uint64 {
	e.t.Helper()
	out := map[string]uint64{".": e.lstat(".").Ino}
	var rec func(rel string)
	rec = func(rel string) {
		for _, d := range readDirents(e.t, e.path(rel)) {
			p := filepath.Join(rel, d.name)
			st := e.lstat(p)
			if d.ino != st.Ino {
				e.t.Errorf("%s: d_ino %#x, st_ino %#x", p, d.ino, st.Ino)
			}
			isDir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR
			if isDir != (d.typ == syscall.DT_DIR) {
				e.t.Errorf("%s: d_type %d, st_mode %o", p, d.typ, st.Mode)
			}
			if n, err := e.lfs.Walk(p); err != nil || n.Ino() != st.Ino {
				e.t.Errorf("%s: leasefs ino %#x (%v), st_ino %#x", p, n.Ino(), err, st.Ino)
			}
			out[p] = st.Ino
			if isDir {
				rec(p)
			}
		}
	}
	rec(".")
	return out
}
