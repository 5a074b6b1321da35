//go:build linux

package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/store"
)

// xattrLeases is how many lease files testNoXattrs lists.
const xattrLeases = 300

// testNoXattrs: the tree has no extended attributes, and the backend
// answers so that the kernel stops asking: across `ls -l` of hundreds of
// files, `ls -lR` of the mount and getfattr of a payload, at most one
// GETXATTR and one LISTXATTR reach the daemon, and every call fails with
// EOPNOTSUPP. A setxattr stays refused (EROFS).
func testNoXattrs(t *testing.T, b Backend) {
	var gets, lists atomic.Int64
	e := newEnvWith(t, b, MountOptions{GetXattrs: &gets, ListXattrs: &lists}, t.TempDir())
	for i := range xattrLeases {
		if _, _, err := e.st.AcquireLease(e.gens[0].ID, fmt.Sprintf("x%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("ls", "-l", e.path("leases")).CombinedOutput()
	if err != nil {
		t.Fatalf("ls -l leases: %v: %s", err, out)
	}
	if n := strings.Count(string(out), "\n-rw-r--r-- 3 "); n < xattrLeases {
		t.Errorf("ls -l leases lists %d lease files, want at least %d:\n%s", n, xattrLeases, out)
	}
	if out, err := exec.Command("ls", "-lR", e.mnt).CombinedOutput(); err != nil {
		t.Fatalf("ls -lR: %v: %s", err, out)
	}
	rel := "generations/g000001/payload/state.bin"
	if out, err := exec.Command("getfattr", "-d", "-m", "-", e.path(rel)).CombinedOutput(); strings.TrimSpace(string(out)) != "" && !strings.Contains(string(out), "Operation not supported") {
		t.Errorf("getfattr -d %s: %v: %q, want nothing", rel, err, out)
	}
	for _, p := range []string{rel, "generations/g000001/status", "leases/x000", "."} {
		_, err := unix.Getxattr(e.path(p), "user.templatefs.sha256", make([]byte, 128))
		wantErrno(t, "getxattr "+p, err, syscall.EOPNOTSUPP)
		_, err = unix.Listxattr(e.path(p), make([]byte, 128))
		wantErrno(t, "listxattr "+p, err, syscall.EOPNOTSUPP)
	}
	wantErrno(t, "setxattr "+rel, unix.Setxattr(e.path(rel), "user.x", []byte("1"), 0), syscall.EROFS)
	t.Logf("%d GETXATTR and %d LISTXATTR requests reached the daemon", gets.Load(), lists.Load())
	if gets.Load() > 1 || lists.Load() > 1 {
		t.Errorf("%d GETXATTR and %d LISTXATTR requests reached the daemon across %d files, want at most one of each", gets.Load(), lists.Load(), xattrLeases)
	}
}

// testSums: each generation's SHA256SUMS checks its payloads with
// `sha256sum -c` run in the generation directory, under generations/ and
// tombstones/ alike, listing every published artifact once, sorted by
// name, with the digest the store recorded.
func testSums(t *testing.T, b Backend) {
	e := newEnv(t, b)
	last := e.gens[len(e.gens)-1].ID.String()
	if err := os.Rename(e.path("generations/"+last), e.path("tombstones/"+last)); err != nil {
		t.Fatal(err)
	}
	for _, g := range e.gens {
		dir := "generations/" + g.ID.String()
		if g.ID.String() == last {
			dir = "tombstones/" + last
		}
		// The shell changes into the directory after its exec: a child of
		// this process started with Dir on the mount would chdir between
		// vfork and exec, with its parent's thread suspended, and deadlock
		// the mount if the garbage collector then stops the world.
		out, err := exec.Command("sh", "-c", `cd "$1" && exec sha256sum --strict -c SHA256SUMS`, "sh", e.path(dir)).CombinedOutput()
		if err != nil {
			t.Errorf("%s: sha256sum -c SHA256SUMS: %v: %s", dir, err, out)
		}
		arts := slices.SortedFunc(slices.Values(g.Artifacts), func(a, b store.Artifact) int { return strings.Compare(a.Name, b.Name) })
		var want, checked []string
		for _, a := range arts {
			want = append(want, a.SHA256+"  payload/"+a.Name+"\n")
			checked = append(checked, "payload/"+a.Name+": OK\n")
		}
		if got := string(out); got != strings.Join(checked, "") {
			t.Errorf("%s: sha256sum -c printed\n%s\nwant\n%s", dir, got, strings.Join(checked, ""))
		}
		if got := e.read(dir + "/SHA256SUMS"); got != strings.Join(want, "") {
			t.Errorf("%s: SHA256SUMS:\n%s\nwant\n%s", dir, got, strings.Join(want, ""))
		}
	}
}
