package leasefs

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"templatefs/store"
)

// storeMethods are the exported methods of FS that read or change the
// store, so must return ErrDetached after Detach; storeFree are those
// that never touch it. Every exported method is in one list
// (TestDetachCoversEveryMethod): a new entry point must be classified,
// and if it touches the store, call f.enter.
var (
	storeMethods = []string{"Attr", "CheckRemove", "Create", "Lookup", "MakeEntry", "Mkdir", "Open", "ReadDir", "ReadDirFrom", "ReadDirPlusFrom",
		"OpenAttr", "Remove", "Rename", "Rmdir", "SetAttr", "SetIncomingAttr", "Walk"}
	storeFree = []string{"Allocate", "ChangeXattr", "Detach", "Detached", "EndEvents", "OpenErrno", "Refuse", "Root", "SetOwners", "WatchChanges"}
)

func TestDetachCoversEveryMethod(t *testing.T) {
	typ := reflect.TypeOf(&FS{})
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if !slices.Contains(storeMethods, name) && !slices.Contains(storeFree, name) {
			t.Errorf("FS.%s is in neither storeMethods nor storeFree (detach_test.go): if it touches the store it must call f.enter and be listed in storeMethods", name)
		}
	}
}

// TestDetach opens handles of each kind, detaches and closes the store
// (as a stopping daemon does), then calls every store entry point on every
// node: each must fail with ErrDetached (ENOTCONN), none may panic, open
// handles keep reading, writes to open command files change nothing, and
// a store opened again (the new daemon) finds everything as it was.
func TestDetach(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	tree := fx.walkTree()
	payload, err := fx.fs.Open(fx.walk("generations/g000001/payload/memory.bin"), OpenFlags{}, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer payload.File.Close()
	status, err := fx.fs.Open(fx.walk("generations/g000001/status"), OpenFlags{}, owner)
	if err != nil {
		t.Fatal(err)
	}
	index, err := fx.fs.Open(fx.walk("store.db"), OpenFlags{}, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer index.Snapshot.Close()
	ctl, err := fx.fs.Open(fx.walk("generations/g000001/ctl"), OpenFlags{Write: true}, owner)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := fx.fs.Open(fx.walk("leases/c1"), OpenFlags{Write: true}, owner)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := fx.fs.OpenAttr(fx.walk("generations/g000001/status"), status); err != nil || a.Size != int64(len(status.Data)) || a.Ino == 0 {
		t.Errorf("OpenAttr of the open status: %+v, %v; want the size of its text, %d", a, err, len(status.Data))
	}
	if a, err := fx.fs.OpenAttr(fx.walk("store.db"), index); err != nil || a.Size == 0 {
		t.Errorf("OpenAttr of the open index snapshot: %+v, %v", a, err)
	} else if fi, err := index.Snapshot.Stat(); err != nil || fi.Size() != a.Size {
		t.Errorf("OpenAttr of the open index snapshot: size %d, the snapshot has %v (%v)", a.Size, fi.Size(), err)
	}
	if _, err := ctl.Commands.Write([]byte("tomb"), owner); err != nil { // a partial line, pending at detach
		t.Fatal(err)
	}

	fx.fs.Detach()
	fx.fs.Detach() // idempotent
	if !fx.fs.Detached() {
		t.Fatal("Detached() = false after Detach")
	}
	if err := fx.st.Close(); err != nil {
		t.Fatal(err)
	}

	detached := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrDetached) || ToErrno(err) != ENOTCONN {
			t.Errorf("%s after Detach: %v (%v), want ErrDetached (ENOTCONN)", what, err, ToErrno(err))
		}
	}
	for path, n := range tree {
		_, err := fx.fs.Attr(n)
		detached("Attr("+path+")", err)
		detached("SetAttr("+path+")", fx.fs.SetAttr(n, ChangeTimes, owner))
		if _, err := fx.fs.Walk(path); path != "." {
			detached("Walk("+path+")", err)
		}
		if n.IsDir() {
			_, err := fx.fs.ReadDir(n)
			detached("ReadDir("+path+")", err)
			_, err = fx.fs.ReadDirFrom(n, "", 10)
			detached("ReadDirFrom("+path+")", err)
			_, err = fx.fs.ReadDirPlusFrom(n, "", 10)
			detached("ReadDirPlusFrom("+path+")", err)
			_, err = fx.fs.Lookup(n, "x")
			detached("Lookup("+path+")", err)
			_, err = fx.fs.Create(n, "c9", OpenFlags{Write: true}, owner)
			detached("Create("+path+")", err)
			for _, name := range []string{"c1", "g000002", "x"} {
				detached("Remove("+path+")", fx.fs.Remove(n, name, owner))
				detached("Rmdir("+path+")", fx.fs.Rmdir(n, name, owner))
				detached("CheckRemove("+path+")", fx.fs.CheckRemove(n, name, owner))
				detached("MakeEntry("+path+")", fx.fs.MakeEntry(n, name, owner))
				detached("Rename("+path+")", fx.fs.Rename(n, name, fx.fs.Root(), name, 0, owner))
			}
			continue
		}
		_, err = fx.fs.Open(n, OpenFlags{}, owner)
		detached("Open("+path+")", err)
		_, err = fx.fs.OpenAttr(n, status)
		detached("OpenAttr("+path+")", err)
	}
	for name, h := range map[string]Handle{"ctl": ctl, "lease": lease} {
		for _, line := range []string{"stone\n", "kill\n", "pid 1\n", "lift\n", "retire\n"} {
			_, err := h.Commands.Write([]byte(line), owner)
			detached("write "+strings.TrimSpace(line)+" to open "+name, err)
		}
		_, err := h.Commands.Write([]byte("kill\n"), other)
		detached("write by another uid to open "+name, err)
	}
	detached("flush of the ctl file's pending line", ctl.Commands.Flush())
	if err := lease.Commands.Flush(); err != nil {
		t.Errorf("flush with nothing pending after Detach: %v, want nil", err)
	}

	buf := make([]byte, 4096)
	if _, err := payload.File.ReadAt(buf, 0); err != nil {
		t.Errorf("read of the open payload after Detach: %v", err)
	}
	if !strings.Contains(string(status.Data), "state") {
		t.Errorf("open status snapshot: %q", status.Data)
	}
	if _, err := index.Snapshot.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, index.Snapshot); err != nil || n == 0 {
		t.Errorf("read of the open index snapshot after Detach: %d bytes, %v", n, err)
	}

	fx.open() // the next daemon
	if g, err := fx.st.Generation(fx.gens[1].ID); err != nil || g.State != store.Published {
		t.Errorf("g1 after the detached daemon's refused tombstone: %v, %v; want published", g.State, err)
	}
	if l, err := fx.st.Lease("c1"); err != nil || l.Generation != fx.gens[1].ID {
		t.Errorf("lease c1 after the detached daemon's refused kill: %+v, %v", l, err)
	}
	if _, err := fx.st.Lease("c9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("lease c9 created by a detached daemon: %v, want ErrNotFound", err)
	}
}

// TestDetachWaitsForCallsInFlight: Detach returns only once a call that
// entered before it (a `kill` write, blocked in the process's kill) has
// finished, so the caller never closes the store under it; calls that
// arrive meanwhile fail with ErrDetached at once.
func TestDetachWaitsForCallsInFlight(t *testing.T) {
	procs := &fakeProcs{verdict: store.ProcessAlive, kill: func() (bool, error) { return true, nil }}
	fx := newFixtureWith(t, makeCaptures(t), procs)
	if _, err := fx.st.BindLease("c1", 42); err != nil {
		t.Fatal(err)
	}
	entered, unblock := make(chan struct{}), make(chan struct{})
	procs.mu.Lock()
	procs.kill = func() (bool, error) {
		close(entered)
		<-unblock
		procs.verdict = store.ProcessExited // Kill holds procs.mu
		return true, nil
	}
	procs.mu.Unlock()
	h, err := fx.fs.Open(fx.walk("leases/c1"), OpenFlags{Write: true}, owner)
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan error, 1)
	go func() {
		_, err := h.Commands.Write([]byte("kill\n"), owner)
		killed <- err
	}()
	<-entered
	detached := make(chan struct{})
	go func() {
		fx.fs.Detach()
		close(detached)
	}()
	for !fx.fs.Detached() {
		time.Sleep(time.Millisecond)
	}
	if _, err := fx.fs.Walk("leases"); !errors.Is(err, ErrDetached) {
		t.Errorf("walk while Detach waits: %v, want ErrDetached", err)
	}
	select {
	case <-detached:
		t.Fatal("Detach returned while a kill write was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(unblock)
	if err := <-killed; err != nil {
		t.Fatalf("the kill write in flight at Detach: %v", err)
	}
	select {
	case <-detached:
	case <-time.After(time.Minute):
		t.Fatal("Detach still waiting after the call in flight ended")
	}
	if err := fx.st.Close(); err != nil {
		t.Fatal(err)
	}
	fx.open()
	if _, err := fx.st.Lease("c1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("lease c1 after the kill that finished before Detach returned: %v, want gone", err)
	}
}
