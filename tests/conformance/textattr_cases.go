//go:build linux

package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"templatefs/internal/hostclock"
	"templatefs/tests/harness"
)

// mtime returns rel's st_mtime.
func (e *env) mtime(rel string) time.Time {
	e.t.Helper()
	st := e.lstat(rel)
	return time.Unix(st.Mtim.Unix())
}

// wcBytes is `cat rel | wc -c`: the size of what a read returns now.
func (e *env) wcBytes(rel string) int64 {
	e.t.Helper()
	out, err := exec.Command("sh", "-c", `cat "$1" | wc -c`, "sh", e.path(rel)).Output()
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// afterSecondOf waits until the host clock (hostclock, which dates the
// store's records and so the text files' mtimes) is in a later second
// than t, so that a change made next gets an mtime that rsync's quick
// check (whole seconds) can tell from t, and returns the time just before
// the change. It waits for a condition, at most a second; nothing is
// timed.
func afterSecondOf(t time.Time) time.Time {
	for hostclock.Now().Unix() <= t.Unix() {
		time.Sleep(10 * time.Millisecond)
	}
	return hostclock.Now()
}

// wantTruthfulStat checks that rel's stat size is what a read returns and
// that its mtime is not before before, a time taken before a change to
// what it shows.
func (e *env) wantTruthfulStat(rel string, before time.Time) {
	e.t.Helper()
	st := e.lstat(rel)
	if n := e.wcBytes(rel); st.Size != n {
		e.t.Errorf("%s: st_size %d, cat | wc -c %d", rel, st.Size, n)
	}
	if m := time.Unix(st.Mtim.Unix()); m.Before(before) {
		e.t.Errorf("%s: mtime %v, before the change at %v", rel, m, before)
	}
}

// testTextAttrs: status and store change content without changing size
// (a lease count going from 0 to 1, from 1 to 2) and a lease record
// changes when bound; each stat tells the truth at once (zero attribute
// timeouts), and rsync -a run again copies the change.
func testTextAttrs(t *testing.T, b Backend) {
	e := newEnv(t, b)
	status, storeFile := "generations/g000002/status", "store"
	dest := t.TempDir()
	rsync := func(rels ...string) {
		t.Helper()
		args := []string{"-a"}
		for _, rel := range rels {
			args = append(args, e.path(rel))
		}
		out, err := exec.Command("rsync", append(args, dest+"/")...).CombinedOutput()
		if err != nil {
			t.Fatalf("rsync -a: %v: %s", err, out)
		}
	}
	copied := func(rel string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dest, filepath.Base(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	rsync(status, storeFile, "leases/c1")
	statusSize, storeSize := e.lstat(status).Size, e.lstat(storeFile).Size
	before := afterSecondOf(latestOf(e.mtime(status), e.mtime(storeFile)))
	if err := create(e, "generations/g000002/leases/n1"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.read(status), "leases: 1\n") || e.lstat(status).Size != statusSize || e.lstat(storeFile).Size != storeSize {
		t.Fatalf("the case needs changes of content at the same size:\n%s", e.read(status))
	}
	e.wantTruthfulStat(status, before)
	e.wantTruthfulStat(storeFile, before)
	rsync(status, storeFile)
	for _, rel := range []string{status, storeFile} {
		if got, now := copied(rel), e.read(rel); got != now {
			t.Errorf("rsync -a again left a stale %s:\n%s\nnow:\n%s", rel, got, now)
		}
	}

	// A state change, seen under the generation's new name.
	before = afterSecondOf(latestOf(e.mtime(status), e.mtime(storeFile)))
	e.echo("tombstone", "generations/g000002/ctl")
	e.wantTruthfulStat("tombstones/g000002/status", before)
	e.wantTruthfulStat(storeFile, before)

	// A lease record: binding changes it.
	sleep := harness.Sleeper(t)
	before = afterSecondOf(e.mtime("leases/c1"))
	e.echo("pid "+strconv.Itoa(sleep.Process.Pid), "leases/c1")
	e.wantTruthfulStat("leases/c1", before)
	rsync("leases/c1")
	if got, now := copied("leases/c1"), e.read("leases/c1"); got != now {
		t.Errorf("rsync -a again left a stale lease record:\n%s\nnow:\n%s", got, now)
	}
}

// latestOf returns the later of a and b.
func latestOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
