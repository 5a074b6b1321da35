package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/internal/sample"
	"templatefs/store"
	"templatefs/store/templatekey"
	"templatefs/tests/harness"
)

// smallFS mounts a tmpfs of size bytes (mode 0700, so the store's path
// checks accept it) on a new directory and unmounts it at the end of the
// test. Without the privilege to mount it skips, or fails when CI
// requires every real part (harness.RequireFUSEEnv=1).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("size=%s,mode=0700,uid=%d,gid=%d", size, os.Geteuid(), os.Getegid())
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		harness.SkipOrFail(t, "cannot mount a %s tmpfs for a full file system (needs CAP_SYS_ADMIN): %v", size, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}

// bigCapture writes a capture whose state.bin is size bytes of data (no
// holes), distinct per seed, outside the small file system.
func bigCapture(t *testing.T, size uint64, seed uint64) string {
	t.Helper()
	o := sampleOptions(6, 1<<20)
	o.StateSizeBytes = size
	dir := filepath.Join(t.TempDir(), "capture")
	if err := sample.WriteCapture(dir, o, seed); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fill writes path until the file system is full (ENOSPC) and returns how
// many bytes it holds.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	var n int64
	for {
		k, err := f.Write(block)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkClean fails the test unless Check (with digests) finds nothing.
func checkClean(t *testing.T, st *store.Store, when string) {
	t.Helper()
	problems, err := st.Check(store.CheckOptions{Digests: true})
	if err != nil || len(problems) != 0 {
		t.Errorf("check %s: %q, %v; want a clean store", when, problems, err)
	}
}

// TestFullFileSystem runs a store on a real full file system (a 64 MiB
// tmpfs): publications succeed until one finds it full, which fails with
// ENOSPC and leaves no generation and no staging leftover; with the file
// system then completely full a lease and a tombstone either succeed or
// fail with ENOSPC, and the store stays consistent either way; leases
// then go on until the index cannot grow, whose commit fails with ENOSPC
// and makes the store read-only; once space is freed and the store
// restarted, every acknowledged lease is there, publication, leases,
// tombstones and retirement work again, and Check finds nothing.
func TestFullFileSystem(t *testing.T) {
	fsDir := smallFS(t, "64m")
	dir := filepath.Join(fsDir, "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	host := sampleHost()
	open := func() *store.Store {
		st, err := store.Open(dir, store.Options{Host: host})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() }) // before the unmount
		return st
	}
	st := open()
	class := templatekey.SampleClass()

	const stateSize = 8 << 20
	var gens []store.Generation
	seed := uint64(100)
	for full := false; !full; seed++ {
		if len(gens) > 10 {
			t.Fatalf("published %d captures of %d MiB into 64 MiB without ENOSPC", len(gens), stateSize>>20)
		}
		g, err := st.Publish(bigCapture(t, stateSize, seed), &class)
		switch {
		case err == nil:
			gens = append(gens, g)
		case errors.Is(err, syscall.ENOSPC):
			t.Logf("publication %d found the file system full: %v", len(gens)+1, err)
			full = true
		default:
			t.Fatalf("publication %d: %v, want success or ENOSPC", len(gens)+1, err)
		}
	}
	if len(gens) < 2 {
		t.Fatalf("only %d generations fit; the test needs two", len(gens))
	}
	if got, err := st.Generations(); err != nil || len(got) != len(gens) {
		t.Errorf("generations after the failed publication: %d, %v; want the %d published", len(got), err, len(gens))
	}
	if es, err := os.ReadDir(filepath.Join(dir, store.StagingDir)); err != nil || len(es) != 0 {
		t.Errorf("staging/ after the failed publication: %v, %v; want it empty", es, err)
	}
	checkClean(t, st, "after the failed publication")

	// Now nothing is left at all: bbolt's commit needs a page of its own.
	filler := filepath.Join(fsDir, "filler")
	t.Logf("filler took the last %d bytes", fill(t, filler))
	_, _, leaseErr := st.AcquireLease(gens[0].ID, "on-full")
	_, tombErr := st.Tombstone(gens[1].ID, 0)
	for what, err := range map[string]error{"lease": leaseErr, "tombstone": tombErr} {
		switch {
		case err == nil:
			t.Logf("%s on the full file system succeeded (bbolt had free pages)", what)
		case errors.Is(err, syscall.ENOSPC):
			t.Logf("%s on the full file system: %v", what, err)
		default:
			t.Errorf("%s on the full file system: %v, want success or ENOSPC", what, err)
		}
	}
	if _, err := st.Lease("on-full"); (err == nil) != (leaseErr == nil) {
		t.Errorf("lease after an acquisition that returned %v: %v", leaseErr, err)
	}
	if g, err := st.Generation(gens[1].ID); err != nil || (g.State == store.Tombstoned) != (tombErr == nil) {
		t.Errorf("generation %s after a tombstone that returned %v: %+v, %v", gens[1].ID, tombErr, g, err)
	}
	checkClean(t, st, "on the full file system")

	// Leases until the index must grow: that commit fails with ENOSPC,
	// the store turns read-only, and every acknowledged lease survives
	// the restart.
	var acked []string
	var growErr error
	for i := 0; growErr == nil; i++ {
		if i == 20000 {
			t.Fatalf("%d leases on a full file system, and the index never needed a new page", i)
		}
		clone := fmt.Sprintf("fill-%d", i)
		if _, _, growErr = st.AcquireLease(gens[0].ID, clone); growErr == nil {
			acked = append(acked, clone)
		}
	}
	if !errors.Is(growErr, syscall.ENOSPC) {
		t.Fatalf("lease %d on the full file system: %v, want ENOSPC", len(acked)+1, growErr)
	}
	t.Logf("lease %d found the index unable to grow: %v", len(acked)+1, growErr)
	if ro := st.ReadOnly(); !errors.Is(ro, store.ErrReadOnly) || !errors.Is(ro, syscall.ENOSPC) {
		t.Errorf("store after the failed commit: ReadOnly() = %v, want ErrReadOnly for ENOSPC", ro)
	}
	if _, err := st.Tombstone(gens[0].ID, 0); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("tombstone on the read-only store: %v, want ErrReadOnly", err)
	}

	// Free space; a store that went read-only is restarted.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = open()
	for _, clone := range acked {
		if _, err := st.Lease(clone); err != nil {
			t.Fatalf("acknowledged lease %s after the restart: %v", clone, err)
		}
	}
	if _, err := st.Lease(fmt.Sprintf("fill-%d", len(acked))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the lease whose commit failed, after the restart: %v, want ErrNotFound", err)
	}
	checkClean(t, st, "after the restart")
	if _, err := st.Tombstone(gens[1].ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retire(gens[1].ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Generation(gens[1].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retired generation %s: %v, want ErrNotFound", gens[1].ID, err)
	}
	g, err := st.Publish(bigCapture(t, stateSize, seed), &class)
	if err != nil {
		t.Fatalf("publication after freeing space: %v", err)
	}
	if _, _, err := st.AcquireLease(g.ID, "after"); err != nil {
		t.Errorf("lease after freeing space: %v", err)
	}
	checkClean(t, st, "after freeing space")
}
