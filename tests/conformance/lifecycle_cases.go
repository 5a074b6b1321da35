//go:build linux

package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"templatefs/store"
	"templatefs/tests/harness"
)

// sh runs script with sh -c and args as $1...; it returns the combined
// output and the error.
func (e *env) sh(script string, args ...string) (string, error) {
	out, err := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...).CombinedOutput()
	return string(out), err
}

// mustSh runs script and fails the test if it fails.
func (e *env) mustSh(script string, args ...string) {
	e.t.Helper()
	if out, err := e.sh(script, args...); err != nil {
		e.t.Fatalf("sh -c %q %q: %v: %s", script, args, err, out)
	}
}

// echo writes text to rel the way a shell does: open O_WRONLY|O_CREAT|
// O_TRUNC, one write(2) of text and a newline.
func (e *env) echo(text, rel string) {
	e.t.Helper()
	e.mustSh(`echo "$1" > "$2"`, text, e.path(rel))
}

// writeCmd opens rel O_WRONLY|O_TRUNC and writes data in one write(2),
// returning the first error.
func (e *env) writeCmd(rel, data string) error {
	f, err := os.OpenFile(e.path(rel), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(data))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (e *env) read(rel string) string {
	e.t.Helper()
	data, err := os.ReadFile(e.path(rel))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

// leaseFile reads and decodes a lease file.
func (e *env) leaseFile(rel string) store.Lease {
	e.t.Helper()
	var l store.Lease
	if err := json.Unmarshal([]byte(e.read(rel)), &l); err != nil {
		e.t.Fatalf("%s: %v", rel, err)
	}
	return l
}

// wantGone checks that rel is ENOENT at once, by stat and in its parent's
// listing.
func (e *env) wantGone(rel string) {
	e.t.Helper()
	_, err := os.Lstat(e.path(rel))
	wantErrno(e.t, "lstat "+rel, err, syscall.ENOENT)
	if slices.Contains(e.names(filepath.Dir(rel)), filepath.Base(rel)) {
		e.t.Errorf("%s still listed", rel)
	}
}

func (e *env) wantListed(dir string, want ...string) {
	e.t.Helper()
	if got := e.names(dir); !slices.Equal(got, want) {
		e.t.Errorf("%s lists %q, want %q", dir, got, want)
	}
}

func testLeaseBindAndKill(t *testing.T, b Backend) {
	e := newEnv(t, b)
	sleep := harness.Sleeper(t)
	pid := strconv.Itoa(sleep.Process.Pid)

	e.echo("pid "+pid, "leases/c1")
	l := e.leaseFile("generations/g000001/leases/c1")
	if l.State != store.Bound || l.Process == nil || l.Process.PID != sleep.Process.Pid || l.BoundAt.IsZero() {
		t.Fatalf("lease file after pid write: %+v", l)
	}
	if rec, err := e.st.Lease("c1"); err != nil || rec.State != store.Bound {
		t.Errorf("store record after pid write: %+v, %v", rec, err)
	}
	if st := e.lstat("keys/" + e.gens[0].KeyID + "/leases/c1"); st.Size != int64(len(e.read("leases/c1"))) {
		t.Errorf("stat after pid write: size %d, content %d bytes", st.Size, len(e.read("leases/c1")))
	}
	// The same process through the lease's other name: idempotent.
	e.echo("pid "+pid, "generations/g000001/leases/c1")

	wantErrno(t, "rm of a live bound lease", os.Remove(e.path("leases/c1")), syscall.EBUSY)
	if _, err := os.Lstat(e.path("leases/c1")); err != nil {
		t.Errorf("lease gone after refused rm: %v", err)
	}
	if status := e.read("generations/g000001/status"); !strings.Contains(status, "last_refusal: ") ||
		!strings.Contains(status, " unlink c1 EBUSY: ") || !strings.Contains(status, "bound process is alive") {
		t.Errorf("status lacks the refused rm:\n%s", status)
	}
	other := harness.Sleeper(t)
	wantErrno(t, "bind to another process", e.writeCmd("leases/c1", fmt.Sprintf("pid %d\n", other.Process.Pid)), syscall.EBUSY)
	wantErrno(t, "bind to init", e.writeCmd("leases/c1", "pid 1\n"), syscall.EINVAL)
	for _, bad := range []string{"pid 0\n", "pid -1", "pid 01", "PID 5", "pid  5", "kill now\n", "pid 2147483648"} {
		wantErrno(t, "write "+strconv.Quote(bad), e.writeCmd("leases/c1", bad), syscall.EINVAL)
	}
	wantErrno(t, "write of 65 bytes", e.writeCmd("leases/c1", strings.Repeat("k", 65)), syscall.EINVAL)
	if got := e.leaseFile("leases/c1"); got.State != store.Bound || got.Process.PID != sleep.Process.Pid {
		t.Errorf("refused writes changed the lease: %+v", got)
	}

	e.echo("kill", "generations/g000001/leases/c1")
	e.wantGone("leases/c1")
	e.wantGone("generations/g000001/leases/c1")
	if _, err := e.st.Lease("c1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("store still has c1 after kill: %v", err)
	}
	var exit *exec.ExitError
	if err := sleep.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("sleep ended with %v, want SIGKILL", err)
	}

	t.Run("no such process", func(t *testing.T) {
		if err := create(e, "generations/g000002/leases/c2"); err != nil {
			t.Fatal(err)
		}
		wantErrno(t, "pid of no process", e.writeCmd("leases/c2", "pid "+strconv.Itoa(leaseMaxPID)), syscall.ESRCH)
		if got := e.leaseFile("leases/c2"); got.State != store.Reserved {
			t.Errorf("lease after ESRCH: %+v", got)
		}
	})
	t.Run("rm after exit", func(t *testing.T) {
		other := harness.Sleeper(t)
		e.echo("pid "+strconv.Itoa(other.Process.Pid), "leases/c2")
		other.Process.Kill()
		other.Wait()
		if err := os.Remove(e.path("leases/c2")); err != nil {
			t.Fatalf("rm after the bound process exited: %v", err)
		}
		e.wantGone("leases/c2")
	})
}

// leaseMaxPID is the largest pid a lease write accepts; no process has it.
const leaseMaxPID = 1<<31 - 1

func create(e *env, rel string) error {
	f, err := os.OpenFile(e.path(rel), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func testCtl(t *testing.T, b Backend) {
	e := newEnv(t, b)
	if got := e.read("generations/g000002/ctl"); got != "tombstone\nlift\nretire\n" {
		t.Errorf("ctl reads %q", got)
	}
	e.lstat("generations/g000002") // the kernel now has a dentry to go stale
	e.echo("tombstone", "generations/g000002/ctl")
	e.wantGone("generations/g000002")
	e.wantListed("tombstones", "g000002")
	if g, _ := e.st.Generation(e.gens[1].ID); g.State != store.Tombstoned || g.Tombstone.UID != 0 {
		t.Errorf("record after ctl tombstone: %+v", g)
	}
	e.echo("tombstone", "tombstones/g000002/ctl") // idempotent
	e.echo("lift", "tombstones/g000002/ctl")
	e.wantGone("tombstones/g000002")
	e.wantListed("generations", "g000001", "g000002", "g000003")
	e.echo("lift", "generations/g000002/ctl") // idempotent

	wantErrno(t, "retire a published generation", e.writeCmd("generations/g000002/ctl", "retire\n"), syscall.EPERM)
	status := e.read("generations/g000002/status")
	if !strings.Contains(status, "state: published\n") || !strings.Contains(status, " ctl retire EPERM: ") || !strings.Contains(status, "not tombstoned") {
		t.Errorf("status after refused retire:\n%s", status)
	}
	for _, bad := range []string{"bogus\n", "Tombstone", "tombstone lift", " retire", "retire\r\n"} {
		wantErrno(t, "ctl write "+strconv.Quote(bad), e.writeCmd("generations/g000002/ctl", bad), syscall.EINVAL)
	}
	if status := e.read("generations/g000002/status"); !strings.Contains(status, " write ctl EINVAL: ") {
		t.Errorf("status lacks the bad ctl write:\n%s", status)
	}
	if out, err := e.sh(`env echo bogus > "$1"`, e.path("generations/g000002/ctl")); err == nil || !strings.Contains(out, "Invalid argument") {
		t.Errorf("shell write of a bad command: %v: %s", err, out)
	}

	// Retire through ctl: g000001 holds c1, so it waits in retiring/.
	e.echo("tombstone", "generations/g000001/ctl")
	e.lstat("tombstones/g000001")
	e.echo("retire", "tombstones/g000001/ctl")
	e.wantGone("tombstones/g000001")
	e.wantListed("retiring", "g000001")
	e.echo("retire", "retiring/g000001/ctl") // idempotent
	wantErrno(t, "lift a retiring generation", e.writeCmd("retiring/g000001/ctl", "lift"), syscall.EPERM)
	if status := e.read("retiring/g000001/status"); !strings.HasPrefix(status, "state: retiring\n") || !strings.Contains(status, "generation is retiring") {
		t.Errorf("retiring status:\n%s", status)
	}
	if err := e.writeCmd("retiring/g000001/leases/c1", "cancel\n"); err != nil {
		t.Fatal(err)
	}
	e.wantGone("retiring/g000001")
}

func testRetire(t *testing.T, b Backend) {
	e := newEnv(t, b)
	if err := os.Rename(e.path("generations/g000001"), e.path("tombstones/g000001")); err != nil {
		t.Fatal(err)
	}
	// A holder keeps a payload open: its dentries pin tombstones/g000001.
	held, err := os.Open(e.path("tombstones/g000001/payload/state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ino := e.lstat("tombstones/g000001").Ino

	wantErrno(t, "rmdir a published generation", syscall.Rmdir(e.path("generations/g000002")), syscall.EPERM)
	if status := e.read("generations/g000002/status"); !strings.Contains(status, " rmdir g000002 EPERM: ") {
		t.Errorf("status lacks the refused rmdir:\n%s", status)
	}
	wantErrno(t, "rmdir a leases directory", syscall.Rmdir(e.path("tombstones/g000001/leases")), syscall.EPERM)
	if out, err := exec.Command("rmdir", e.path("tombstones/g000001")).CombinedOutput(); err != nil {
		t.Fatalf("rmdir tombstones/g000001: %v: %s", err, out)
	}
	e.wantGone("tombstones/g000001")
	e.wantListed("retiring", "g000001")
	if g, err := e.st.Generation(e.gens[0].ID); err != nil || g.State != store.Retiring || g.Retirement == nil {
		t.Fatalf("record after rmdir: %+v, %v", g, err)
	}
	// Still readable, by path and through the open file.
	e.wantListed("retiring/g000001", "SHA256SUMS", "ctl", "leases", "manifest", "payload", "status")
	e.wantListed("retiring/g000001/leases", "c1")
	if st := e.lstat("retiring/g000001"); st.Ino != ino {
		t.Errorf("retiring/g000001 ino %#x, was %#x", st.Ino, ino)
	}
	if _, err := os.ReadFile(e.path("retiring/g000001/payload/state.bin")); err != nil {
		t.Errorf("read payload of a retiring generation: %v", err)
	}
	if _, err := held.ReadAt(make([]byte, 100), 0); err != nil {
		t.Errorf("read through the held file: %v", err)
	}
	if status := e.read("retiring/g000001/status"); !strings.HasPrefix(status, "state: retiring\n") {
		t.Errorf("status:\n%s", status)
	}
	e.walk() // d_ino, st_ino and leasefs agree below retiring/ too
	wantErrno(t, "rmdir a retiring generation", syscall.Rmdir(e.path("retiring/g000001")), syscall.EBUSY)
	wantErrno(t, "lift a retiring generation", os.Rename(e.path("retiring/g000001"), e.path("generations/g000001")), syscall.EPERM)

	wantErrno(t, "rm of the last lease, reserved", os.Remove(e.path("leases/c1")), syscall.EBUSY)
	if err := e.writeCmd("leases/c1", "cancel\n"); err != nil {
		t.Fatalf("cancel the last lease: %v", err)
	}
	e.wantGone("retiring/g000001")
	if _, err := e.st.Generation(e.gens[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("generation still in the store: %v", err)
	}

	// Without leases, retirement deletes at once.
	if err := os.Rename(e.path("generations/g000003"), e.path("tombstones/g000003")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rmdir(e.path("tombstones/g000003")); err != nil {
		t.Fatal(err)
	}
	e.wantGone("tombstones/g000003")
	e.wantGone("retiring/g000003")
	e.wantListed("generations", "g000002")
}

func testLift(t *testing.T, b Backend) {
	e := newEnv(t, b)
	for _, g := range []string{"g000001", "g000002"} {
		if err := os.Rename(e.path("generations/"+g), e.path("tombstones/"+g)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(e.path("tombstones/g000001"), e.path("generations/g000001")); err != nil {
		t.Fatalf("lift by rename: %v", err)
	}
	if out, err := exec.Command("mv", e.path("tombstones/g000002"), e.path("generations/g000002")).CombinedOutput(); err != nil {
		t.Fatalf("mv tombstones/g000002 generations/g000002: %v: %s", err, out)
	}
	e.wantListed("generations", "g000001", "g000002", "g000003")
	e.wantListed("tombstones")
	for _, g := range e.gens[:2] {
		if rec, err := e.st.Generation(g.ID); err != nil || rec.State != store.Published || rec.Tombstone != nil {
			t.Errorf("record after lift: %+v, %v", rec, err)
		}
	}
	if err := create(e, "generations/g000002/leases/after-lift"); err != nil {
		t.Errorf("new lease after lift: %v", err)
	}
}

func testKeyLeases(t *testing.T, b Backend) {
	e := newEnv(t, b)
	dir := "keys/" + e.gens[0].KeyID + "/leases"
	e.wantListed(dir, "c1")
	if out, err := exec.Command("touch", e.path(dir+"/k1")).CombinedOutput(); err != nil {
		t.Fatalf("touch %s/k1: %v: %s", dir, err, out)
	}
	if l, err := e.st.Lease("k1"); err != nil || l.Generation != e.gens[2].ID {
		t.Errorf("k1: %+v, %v; want a lease on the newest generation %s", l, err, e.gens[2].ID)
	}
	if err := os.Rename(e.path("generations/g000003"), e.path("tombstones/g000003")); err != nil {
		t.Fatal(err)
	}
	if err := create(e, dir+"/k2"); err != nil {
		t.Fatal(err)
	}
	if l := e.leaseFile("generations/g000002/leases/k2"); l.Generation != e.gens[1].ID {
		t.Errorf("k2 on %s, want the newest non-tombstoned %s", l.Generation, e.gens[1].ID)
	}
	e.wantListed(dir, "c1", "k1", "k2")
	if st := e.lstat(dir + "/k2"); st.Ino != e.lstat("leases/k2").Ino || st.Nlink != 3 {
		t.Errorf("key lease ino %#x nlink %d, leases/k2 ino %#x", st.Ino, st.Nlink, e.lstat("leases/k2").Ino)
	}
	if err := create(e, dir+"/c1"); err != nil {
		t.Errorf("create of an existing lease of the key (a retry): %v", err)
	}
	if err := e.writeCmd(dir+"/k1", "cancel\n"); err != nil {
		t.Fatal(err)
	}
	e.wantGone("leases/k1")
	e.wantListed(dir, "c1", "k2")
}

// nobody is the second uid the access tests run real tools as.
const nobody = 65534

// asNobody runs name with args as uid and gid 65534 and returns its
// combined output and error.
func asNobody(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// traversableDir returns a new directory that uid 65534 can reach:
// t.TempDir's parent is 0700.
func traversableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// storeState is what the access tests compare before and after: every
// generation and lease record.
func (e *env) storeState() string {
	e.t.Helper()
	gens, err := e.st.Generations()
	if err != nil {
		e.t.Fatal(err)
	}
	leases, err := e.st.Leases()
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := json.Marshal([]any{gens, leases})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func testOtherUser(t *testing.T, b Backend) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run tools as another uid")
	}
	t.Run("allow_other", func(t *testing.T) {
		e := newEnvWith(t, b, MountOptions{AllowOther: true}, traversableDir(t))
		before := e.storeState()
		for _, args := range [][]string{
			{"ls", "-l", e.path("generations/g000001")},
			{"cat", e.path("store"), e.path("leases/c1"), e.path("generations/g000001/status"), e.path("generations/g000001/ctl")},
			{"cat", e.path("generations/g000001/payload/state.bin")},
		} {
			if out, err := asNobody(args[0], args[1:]...); err != nil {
				t.Errorf("%q as uid %d: %v: %s", args, nobody, err, out)
			}
		}
		for _, args := range [][]string{
			{"touch", e.path("generations/g000002/leases/x")},
			{"touch", e.path("keys/" + e.gens[0].KeyID + "/leases/x")},
			{"touch", e.path("leases/c1")},
			{"rm", "-f", e.path("leases/c1")},
			{"mv", e.path("generations/g000001"), e.path("tombstones/g000001")},
			{"rmdir", e.path("generations/g000001")},
			{"sh", "-c", `echo pid 1 > "$1"`, "sh", e.path("leases/c1")},
			{"sh", "-c", `echo tombstone > "$1"`, "sh", e.path("generations/g000001/ctl")},
			{"mkdir", e.path("generations/g000001/leases/d")},
		} {
			out, err := asNobody(args[0], args[1:]...)
			if err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("%q as uid %d: %v: %s; want Permission denied", args, nobody, err, out)
			}
		}
		if after := e.storeState(); after != before {
			t.Errorf("store changed by uid %d:\nbefore %s\nafter  %s", nobody, before, after)
		}
		if status := e.read("generations/g000001/status"); !strings.Contains(status, " EACCES: ") || !strings.Contains(status, "uid 65534") {
			t.Errorf("status lacks the refusal of uid %d:\n%s", nobody, status)
		}
		// The owner (root here) still may.
		if err := create(e, "generations/g000002/leases/x"); err != nil {
			t.Errorf("owner create: %v", err)
		}
	})
	t.Run("owner only", func(t *testing.T) {
		e := newEnvWith(t, b, MountOptions{}, traversableDir(t))
		for _, args := range [][]string{{"stat", e.mnt}, {"ls", e.path("generations")}, {"cat", e.path("store")}} {
			out, err := asNobody(args[0], args[1:]...)
			if err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("%q as uid %d without allow_other: %v: %s; want Permission denied", args, nobody, err, out)
			}
		}
		if _, err := os.ReadFile(e.path("store")); err != nil {
			t.Errorf("owner read: %v", err)
		}
	})
}
