//go:build linux

package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
	"templatefs/store"
	"templatefs/store/manifest"
)

func testMountTree(t *testing.T, b Backend) {
	e := newEnv(t, b)
	inos := e.walk()
	if inos["."] != leasefs.InoRoot {
		t.Errorf("root ino %d, want %d", inos["."], leasefs.InoRoot)
	}
	// root, store, store.db, tombstones, retiring, incoming; keys/ with
	// one key, its two files, its leases/ and lease c1 there; generations/
	// with 3 x 10 nodes and lease c1; leases/ with c1.
	if want := 6 + 6 + 1 + 3*10 + 1 + 2; len(inos) != want {
		t.Errorf("walk found %d paths, want %d", len(inos), want)
	}
	if got := e.names("."); !slices.Equal(got, []string{"generations", "incoming", "keys", "leases", "retiring", "store", "store.db", "tombstones"}) {
		t.Errorf("root lists %q", got)
	}
	st := e.lstat("generations/g000001/leases/c1")
	key := "keys/" + e.gens[0].KeyID + "/leases/c1"
	if st.Nlink != 3 || st.Ino != e.lstat("leases/c1").Ino || st.Ino != e.lstat(key).Ino || st.Mode != syscall.S_IFREG|0o644 {
		t.Errorf("lease file nlink %d mode %o, or inode differs between its names", st.Nlink, st.Mode)
	}
	for rel, mode := range map[string]uint32{
		"generations": syscall.S_IFDIR | 0o555, "leases": syscall.S_IFDIR | 0o755, "generations/g000001/leases": syscall.S_IFDIR | 0o755,
		"store": syscall.S_IFREG | 0o444, "generations/g000001/payload/state.bin": syscall.S_IFREG | 0o444,
	} {
		if st := e.lstat(rel); st.Mode != mode || st.Uid != uint32(os.Geteuid()) {
			t.Errorf("%s: mode %o uid %d, want %o %d", rel, st.Mode, st.Uid, mode, os.Geteuid())
		}
	}
	store, err := os.ReadFile(e.path("store"))
	if err != nil {
		t.Fatal(err)
	}
	if st := e.lstat("store"); st.Size != int64(len(store)) || !strings.Contains(string(store), "generations: 3\n") {
		t.Errorf("store: size %d, read %d bytes:\n%s", st.Size, len(store), store)
	}
}

func testPayload(t *testing.T, b Backend) {
	e := newEnv(t, b)
	g := e.gens[0]
	for _, name := range []string{manifest.ManifestFileName, manifest.StateFileName, manifest.MemoryFileName} {
		rel := "generations/g000001/payload/" + name
		want, err := os.ReadFile(filepath.Join(e.capture, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(e.path(rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes read, capture %d bytes, contents differ", rel, len(got), len(want))
		}
		st := e.lstat(rel)
		if st.Size != int64(len(want)) || st.Blksize <= 0 || !time.Unix(st.Mtim.Unix()).Equal(g.PublishedAt) {
			t.Errorf("%s: size %d blksize %d mtime %v, want %d, > 0, %v", rel, st.Size, st.Blksize, time.Unix(st.Mtim.Unix()), len(want), g.PublishedAt)
		}
	}
	rel := "generations/g000001/payload/memory.bin"
	st := e.lstat(rel)
	if st.Blocks*512 >= st.Size/16 {
		t.Errorf("memory.bin: %d blocks for %d bytes, want sparse", st.Blocks, st.Size)
	}
	backing, err := e.st.OpenPayload(g.ID, manifest.MemoryFileName)
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	var bst syscall.Stat_t
	if err := syscall.Fstat(int(backing.Fd()), &bst); err != nil {
		t.Fatal(err)
	}
	if st.Blocks != bst.Blocks || st.Blksize != bst.Blksize {
		t.Errorf("memory.bin blocks %d blksize %d, backing file %d %d", st.Blocks, st.Blksize, bst.Blocks, bst.Blksize)
	}

	t.Run("seek data and holes", func(t *testing.T) {
		if b.NoSeekData {
			t.Skipf("%s: lseek does not reach the backing file", b.Name)
		}
		f, err := os.Open(e.path(rel))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, off := range []int64{0, 1, 4096, st.Size / 2, st.Size - 1} {
			for _, whence := range []int{unix.SEEK_DATA, unix.SEEK_HOLE} {
				got, gerr := unix.Seek(int(f.Fd()), off, whence)
				want, werr := unix.Seek(int(backing.Fd()), off, whence)
				if got != want || !errors.Is(gerr, werr) && gerr != werr {
					t.Errorf("lseek(%d, %d) = %d, %v; backing file %d, %v", off, whence, got, gerr, want, werr)
				}
			}
		}
	})
	t.Run("read-only", func(t *testing.T) {
		for _, flags := range []int{os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND} {
			f, err := os.OpenFile(e.path(rel), flags, 0)
			if err == nil {
				f.Close()
			}
			wantErrno(t, fmt.Sprintf("open flags %#x", flags), err, syscall.EROFS)
		}
		wantErrno(t, "truncate", os.Truncate(e.path(rel), 0), syscall.EROFS)
		wantErrno(t, "chmod", os.Chmod(e.path(rel), 0o644), syscall.EROFS)
		wantErrno(t, "chown", os.Chown(e.path(rel), os.Geteuid(), os.Getegid()), syscall.EROFS)
		wantErrno(t, "utimes", os.Chtimes(e.path(rel), time.Now(), time.Now()), syscall.EROFS)
		wantErrno(t, "setxattr", unix.Setxattr(e.path(rel), "user.x", []byte("1"), 0), syscall.EROFS)
		wantErrno(t, "removexattr", unix.Removexattr(e.path(rel), "user.x"), syscall.EROFS)
		wantErrno(t, "unlink", os.Remove(e.path(rel)), syscall.EPERM)
		f, err := os.OpenFile(e.path("generations/g000001/status"), os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		wantErrno(t, "open status for writing", err, syscall.EROFS)
		if after := e.lstat(rel); after.Size != st.Size || after.Mode != st.Mode {
			t.Errorf("payload changed: size %d mode %o", after.Size, after.Mode)
		}
		if !strings.Contains(e.log.String(), "errno=EROFS") {
			t.Errorf("no refusal logged:\n%s", e.log.String())
		}
	})
	t.Run("mmap", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=mmap", childPathEnv+"="+e.path(rel),
			childWantEnv+"="+filepath.Join(e.capture, manifest.MemoryFileName))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("mmap child: %v: %s", err, out)
		}
	})
}

// mmapChild checks, on a payload file, that a writable shared mapping is
// refused (the file can only be opened O_RDONLY), that a shared read-only
// mapping shows the capture's bytes, and that writing a private mapping
// leaves the file unchanged.
func mmapChild(path, wantPath string) error {
	want, err := os.ReadFile(wantPath)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fd, n := int(f.Fd()), 8192
	if m, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		unix.Munmap(m)
		return errors.New("mmap(PROT_WRITE, MAP_SHARED) of a payload succeeded")
	} else if !errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("mmap(PROT_WRITE, MAP_SHARED): %v, want EACCES", err)
	}
	m, err := unix.Mmap(fd, 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap(PROT_READ, MAP_SHARED): %v", err)
	}
	if !bytes.Equal(m, want[:n]) {
		return errors.New("shared mapping differs from the capture")
	}
	unix.Munmap(m)
	p, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("mmap(PROT_WRITE, MAP_PRIVATE): %v", err)
	}
	p[0] ^= 0xff
	unix.Munmap(p)
	got := make([]byte, n)
	if _, err := f.ReadAt(got, 0); err != nil {
		return err
	}
	if !bytes.Equal(got, want[:n]) {
		return errors.New("writing a private mapping changed the payload")
	}
	return nil
}

func testLeases(t *testing.T, b Backend) {
	e := newEnv(t, b)
	create := func(rel string, flags int) error {
		f, err := os.OpenFile(e.path(rel), flags, 0o644)
		if err == nil {
			return f.Close()
		}
		return err
	}
	if err := create("generations/g000001/leases/new", os.O_CREATE|os.O_EXCL|os.O_WRONLY); err != nil {
		t.Fatalf("create lease: %v", err)
	}
	l, err := e.st.Lease("new")
	if err != nil || l.Generation != e.gens[0].ID {
		t.Fatalf("store lease after create: %+v, %v", l, err)
	}
	if !slices.Contains(e.names("leases"), "new") || !slices.Contains(e.names("generations/g000001/leases"), "new") {
		t.Errorf("new lease not listed: leases %q, generation leases %q", e.names("leases"), e.names("generations/g000001/leases"))
	}
	data, err := os.ReadFile(e.path("leases/new"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(l)
	if string(data) != string(want)+"\n" || e.lstat("leases/new").Size != int64(len(data)) {
		t.Errorf("lease file %q (size %d), store record %s", data, e.lstat("leases/new").Size, want)
	}
	if e.lstat("leases/new").Ino != e.lstat("generations/g000001/leases/new").Ino {
		t.Error("lease inode differs between its two names")
	}

	wantErrno(t, "O_EXCL create of existing lease", create("generations/g000001/leases/new", os.O_CREATE|os.O_EXCL|os.O_WRONLY), syscall.EEXIST)
	if err := create("generations/g000001/leases/new", os.O_CREATE|os.O_WRONLY); err != nil {
		t.Errorf("retried create: %v", err)
	}
	if err := os.Chtimes(e.path("leases/new"), time.Now(), time.Now()); err != nil {
		t.Errorf("utimes on lease: %v", err)
	}
	if touch, err := exec.LookPath("touch"); err == nil {
		for _, rel := range []string{"generations/g000002/leases/touched", "leases/new"} {
			if out, err := exec.Command(touch, e.path(rel)).CombinedOutput(); err != nil {
				t.Errorf("touch %s: %v: %s", rel, err, out)
			}
		}
		if _, err := e.st.Lease("touched"); err != nil {
			t.Errorf("touch made no lease: %v", err)
		}
	}
	f, err := os.OpenFile(e.path("leases/new"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte("bind 1\n"))
	f.Close()
	wantErrno(t, "bad write to lease", err, syscall.EINVAL)

	wantErrno(t, "invalid clone ID", create("generations/g000002/leases/a b", os.O_CREATE|os.O_WRONLY), syscall.EINVAL)
	wantErrno(t, "clone leased elsewhere", create("generations/g000002/leases/c1", os.O_CREATE|os.O_WRONLY), syscall.EBUSY)
	wantErrno(t, "create in top leases", create("leases/other", os.O_CREATE|os.O_WRONLY), syscall.EPERM)
	wantErrno(t, "create in generation", create("generations/g000001/foo", os.O_CREATE|os.O_WRONLY), syscall.EPERM)
	wantErrno(t, "create in root", create("foo", os.O_CREATE|os.O_WRONLY), syscall.EPERM)
	wantErrno(t, "mkdir", os.Mkdir(e.path("generations/g000001/leases/d"), 0o755), syscall.EPERM)
	wantErrno(t, "mkdir existing", os.Mkdir(e.path("generations"), 0o755), syscall.EEXIST)
	wantErrno(t, "symlink", os.Symlink("x", e.path("leases/link")), syscall.EPERM)
	wantErrno(t, "rmdir", os.Remove(e.path("generations/g000001/leases")), syscall.EPERM)
	wantErrno(t, "chmod lease", os.Chmod(e.path("leases/new"), 0o600), syscall.EPERM)
	if log := e.log.String(); !strings.Contains(log, "op=create") || !strings.Contains(log, "errno=EBUSY") ||
		!strings.Contains(log, "path=generations/g000002/leases/c1") || !strings.Contains(log, "already holds a lease") {
		t.Errorf("refusal log lacks op, path, errno or error text:\n%s", log)
	}

	for _, rel := range []string{"leases/new", "generations/g000001/leases/c1"} {
		wantErrno(t, "rm of a reserved lease", os.Remove(e.path(rel)), syscall.EBUSY)
		if err := e.writeCmd(rel, "cancel\n"); err != nil {
			t.Fatalf("cancel %s: %v", rel, err)
		}
	}
	for _, rel := range []string{"leases/new", "generations/g000001/leases/new", "leases/c1", "generations/g000001/leases/c1"} {
		_, err := os.Lstat(e.path(rel))
		wantErrno(t, "lstat after rm "+rel, err, syscall.ENOENT)
	}
	if got := e.names("leases"); !slices.Equal(got, []string{"touched"}) {
		t.Errorf("leases after rm: %q", got)
	}
	if _, err := e.st.Lease("c1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("store still has c1: %v", err)
	}
}

func testTombstone(t *testing.T, b Backend) {
	e := newEnv(t, b)
	before := e.lstat("generations/g000001").Ino
	if err := os.Rename(e.path("generations/g000001"), e.path("tombstones/g000001")); err != nil {
		t.Fatalf("mv to tombstones: %v", err)
	}
	if got := e.names("generations"); !slices.Equal(got, []string{"g000002", "g000003"}) {
		t.Errorf("generations after mv: %q", got)
	}
	if got := e.names("tombstones"); !slices.Equal(got, []string{"g000001"}) {
		t.Errorf("tombstones after mv: %q", got)
	}
	_, err := os.Lstat(e.path("generations/g000001"))
	wantErrno(t, "lstat generations/g000001 after mv", err, syscall.ENOENT)
	if e.lstat("tombstones/g000001").Ino != before {
		t.Error("generation changed inode number when tombstoned")
	}
	status, err := os.ReadFile(e.path("tombstones/g000001/status"))
	if err != nil || !strings.HasPrefix(string(status), "state: tombstoned\n") {
		t.Errorf("status after mv: %q, %v", status, err)
	}
	g, err := e.st.Generation(e.gens[0].ID)
	if err != nil || g.State != store.Tombstoned || g.Tombstone.UID != uint32(os.Geteuid()) {
		t.Errorf("store record after mv: %+v, %v", g, err)
	}

	f, err := os.OpenFile(e.path("tombstones/g000001/leases/new"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		f.Close()
	}
	wantErrno(t, "new lease on tombstoned generation", err, syscall.EPERM)
	for _, rel := range []string{"leases/c1", "tombstones/g000001/leases/c1"} {
		if _, err := os.ReadFile(e.path(rel)); err != nil {
			t.Errorf("granted lease after tombstone: %v", err)
		}
	}

	wantErrno(t, "mv to retiring", os.Rename(e.path("tombstones/g000001"), e.path("retiring/g000001")), syscall.EPERM)
	wantErrno(t, "mv to another name", os.Rename(e.path("generations/g000002"), e.path("tombstones/other")), syscall.EPERM)
	wantErrno(t, "mv within generations", os.Rename(e.path("generations/g000002"), e.path("generations/g000009")), syscall.EPERM)
	if err := unix.Renameat2(unix.AT_FDCWD, e.path("generations/g000002"), unix.AT_FDCWD, e.path("tombstones/g000002"), unix.RENAME_NOREPLACE); err != nil {
		t.Errorf("renameat2 RENAME_NOREPLACE: %v", err)
	}

	mv, err := exec.LookPath("mv")
	if err != nil {
		t.Skip("no mv")
	}
	if out, err := exec.Command(mv, e.path("generations/g000003"), e.path("tombstones/elsewhere")).CombinedOutput(); err == nil {
		t.Errorf("mv to another name succeeded: %s", out)
	}
	if _, err := os.Lstat(e.path("generations/g000003")); err != nil {
		t.Errorf("refused mv moved the generation: %v", err)
	}
	if out, err := exec.Command(mv, e.path("generations/g000003"), e.path("tombstones")).CombinedOutput(); err != nil {
		t.Errorf("mv into tombstones/: %v: %s", err, out)
	}
	if got := e.names("tombstones"); !slices.Equal(got, []string{"g000001", "g000002", "g000003"}) {
		t.Errorf("tombstones after mv: %q", got)
	}
}

func testInoStableAcrossRemount(t *testing.T, b Backend) {
	e := newEnv(t, b)
	before := e.walk()
	e.unmount()
	e.mount(t.TempDir())
	after := e.walk()
	if len(after) != len(before) {
		t.Errorf("%d paths before remount, %d after", len(before), len(after))
	}
	for p, ino := range before {
		if after[p] != ino {
			t.Errorf("%s: ino %#x before remount, %#x after", p, ino, after[p])
		}
	}
}

// TestParallel creates, reads and removes leases from many goroutines at
// once while others read payloads and status (go-fuse "Parallelism": run
// under -race).
func testParallel(t *testing.T, b Backend) {
	e := newEnv(t, b)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, 4*workers)
	for i := range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			clone := fmt.Sprintf("p%d", i)
			rel := "generations/g000002/leases/" + clone
			f, err := os.OpenFile(e.path(rel), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				errs <- fmt.Errorf("create %s: %w", clone, err)
				return
			}
			f.Close()
			if _, err := os.ReadFile(e.path("leases/" + clone)); err != nil {
				errs <- err
			}
			if i%2 == 0 {
				if err := e.writeCmd(rel, "cancel\n"); err != nil {
					errs <- fmt.Errorf("cancel %s: %w", clone, err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for _, rel := range []string{"generations/g000002/status", "generations/g000002/payload/state.bin", "store"} {
				if _, err := os.ReadFile(e.path(rel)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := []string{"c1", "p1", "p3", "p5", "p7"}
	if got := e.names("leases"); !slices.Equal(got, want) {
		t.Errorf("leases after parallel run: %q, want %q", got, want)
	}
	if got := e.names("generations/g000002/leases"); !slices.Equal(got, want[1:]) {
		t.Errorf("generation leases after parallel run: %q, want %q", got, want[1:])
	}
}
