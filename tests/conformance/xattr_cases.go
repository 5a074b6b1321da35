//go:build linux

package conformance

import (
	"bytes"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
	"templatefs/store/manifest"
)

// testXattrs reads the extended attributes of a payload (its digest and
// generation, leasefs.FS.Xattrs) and checks that other nodes have none.
func testXattrs(t *testing.T, b Backend) {
	e := newEnv(t, b)
	g := e.gens[0]
	a, ok := g.Artifact(manifest.StateFileName)
	if !ok {
		t.Fatalf("generation %s has no %s", g.ID, manifest.StateFileName)
	}
	rel := "generations/g000001/payload/" + manifest.StateFileName
	buf := make([]byte, 256)
	for name, want := range map[string]string{leasefs.XattrSHA256: a.SHA256, leasefs.XattrGeneration: g.ID.String()} {
		n, err := unix.Getxattr(e.path(rel), name, buf)
		if err != nil || !bytes.Equal(buf[:n], []byte(want)) {
			t.Errorf("getxattr %s %s: %q, %v; want %q", rel, name, buf[:max(n, 0)], err, want)
		}
	}
	n, err := unix.Listxattr(e.path(rel), buf)
	if err != nil {
		t.Fatalf("listxattr %s: %v", rel, err)
	}
	names := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
	if want := []string{leasefs.XattrSHA256, leasefs.XattrGeneration}; !slices.Equal(names, want) {
		t.Errorf("listxattr %s: %q, want %q", rel, names, want)
	}
	_, err = unix.Getxattr(e.path("generations/g000001/status"), leasefs.XattrSHA256, buf)
	wantErrno(t, "getxattr of status", err, syscall.ENODATA)
}
