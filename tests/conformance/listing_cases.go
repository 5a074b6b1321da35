//go:build linux

package conformance

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// listingLeases is more leases than one page of leasefs.FS.ReadDirFrom
// and far more than one READDIR reply holds, so a listing takes many
// READDIRs and crosses pages.
const listingLeases = 1500

// testListing lists a leases directory of listingLeases entries with
// getdents64 and checks it names each lease once, then reads part of it
// with perl's readdir, seeks back with telldir/seekdir and checks the
// entries after the seek are the ones read there the first time.
func testListing(t *testing.T, b Backend) {
	e := newEnv(t, b)
	want := []string{"c1"}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < listingLeases; i += 8 {
				id := fmt.Sprintf("list%05d", i)
				if _, _, err := e.st.AcquireLease(e.gens[0].ID, id); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want = append(want, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(want)
	for _, dir := range []string{"leases", "generations/g000001/leases"} {
		var got []string
		for _, d := range readDirents(t, e.path(dir)) {
			got = append(got, d.name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s lists %d entries (%d distinct), want the %d leases", dir, len(got), len(slices.Compact(slices.Clone(got))), len(want))
		}
	}

	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("no perl for telldir/seekdir")
	}
	// Read 700 entries, remember the position, read 10, seek back, read
	// 10 again: both runs of 10 must be the same names.
	script := `opendir(D, $ARGV[0]) or die "$!"; readdir D for 1..700; $p = telldir D;
my @a = map { scalar readdir D } 1..10; seekdir D, $p; my @b = map { scalar readdir D } 1..10;
print join(",", @a), "\n", join(",", @b), "\n";`
	out, err := exec.Command(perl, "-e", script, e.path("leases")).CombinedOutput()
	if err != nil {
		t.Fatalf("perl telldir/seekdir: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] != lines[1] || strings.Count(lines[0], "list") != 10 {
		t.Errorf("entries after seekdir differ from those read there first:\n%s", out)
	}
}
