//go:build linux && cgo && fuse3

package winfsp

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/leasefs"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// TestReaddirPages drives Readdir as libfuse does when the kernel's
// buffer holds 100 entries: fill refuses the 101st, and the next call
// passes the offset of the last entry taken. The listing must come out
// whole, once each, in at most 101 fills a call, and a Readdir at an
// earlier offset (seekdir) must resume after that entry.
func TestReaddirPages(t *testing.T) {
	const leases = 1100 // more than two of leasefs's pages (dirPage)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	capture := capturetest.Make(t, t.TempDir(), manifest.SampleOptions{StateSizeBytes: 4096, MemorySizeBytes: 1 << 20, CaptureUTC: hostclock.Now()})
	class := templatekey.SampleClass()
	gen, err := st.Publish(capture, &class)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < leases; i += 8 {
				if _, _, err := st.AcquireLease(gen.ID, fmt.Sprintf("c%05d", i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	lfs, err := leasefs.New(st, leasefs.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFileSystem(lfs, func() {})
	if err != nil {
		t.Fatal(err)
	}
	errc, fh := f.Opendir("/leases")
	if errc != 0 {
		t.Fatalf("Opendir: %d", errc)
	}
	defer f.Releasedir("/leases", fh)

	// call runs one Readdir at ofst taking up to room entries; it returns
	// the names and offsets taken and whether fill was refused one.
	call := func(ofst int64, room int) (names []string, offs []int64, full bool) {
		fills := 0
		errc := f.Readdir("/leases", func(name string, st *fuse.Stat_t, o int64) bool {
			fills++
			if fills > room {
				full = true
				return false
			}
			names, offs = append(names, name), append(offs, o)
			return true
		}, ofst, fh)
		if errc != 0 {
			t.Fatalf("Readdir at %d: %d", ofst, errc)
		}
		if fills > room+1 {
			t.Errorf("Readdir at %d: %d fills after the buffer was full", ofst, fills-room-1)
		}
		return names, offs, full
	}
	var all []string
	var ofst int64
	for calls := 0; ; calls++ {
		if calls > leases {
			t.Fatal("listing never ended")
		}
		names, offs, full := call(ofst, 100)
		for i, o := range offs {
			if o != ofst+int64(i)+1 {
				t.Fatalf("entry %q at offset %d, want %d", names[i], o, ofst+int64(i)+1)
			}
		}
		all = append(all, names...)
		ofst += int64(len(names))
		if !full {
			break
		}
	}
	want := []string{".", ".."}
	for i := range leases {
		want = append(want, fmt.Sprintf("c%05d", i))
	}
	if !slices.Equal(all, want) {
		t.Fatalf("paged listing has %d entries, want %d in order", len(all), len(want))
	}
	for _, at := range []int64{0, 1, 2, 50, 612, int64(len(all)) - 1} {
		names, _, _ := call(at, 3)
		if end := min(int(at)+3, len(all)); !slices.Equal(names, all[at:end]) {
			t.Errorf("Readdir at offset %d gives %q, want %q", at, names, all[at:end])
		}
	}
}
