package leasefs

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"templatefs/store"
)

// TestMetricsFile: the metrics file is found by name in the root (not
// listed), 0444, sized by a rendering now, and each open holds its own
// rendering; it takes no write-open, and without Options.Metrics there
// is none.
func TestMetricsFile(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	if _, err := fx.fs.Lookup(fx.fs.Root(), MetricsFileName); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("lookup without Options.Metrics: %v, want ErrNotFound", err)
	}
	renders := 0
	f, err := New(fx.st, Options{Logger: quiet, Metrics: func() ([]byte, error) {
		renders++
		return fmt.Appendf(nil, "renders %d\n", renders), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.Lookup(f.Root(), MetricsFileName)
	if err != nil || n.Kind() != KindMetricsFile || n.Ino() != InoMetrics {
		t.Fatalf("lookup = %v (ino %#x), %v; want the metrics file", n, n.Ino(), err)
	}
	entries, err := f.ReadDir(f.Root())
	if err != nil || slices.ContainsFunc(entries, func(e DirEntry) bool { return e.Name == MetricsFileName }) {
		t.Errorf("root lists %v, %v; want no metrics file", entries, err)
	}
	a, err := f.Attr(n)
	if err != nil || a.Mode != modeText || a.Size != int64(len("renders 1\n")) {
		t.Errorf("Attr = %+v, %v; want mode 0444 and the rendering's size", a, err)
	}
	h1, err := f.Open(n, OpenFlags{}, owner)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := f.Open(n, OpenFlags{}, owner)
	if err != nil || string(h1.Data) != "renders 2\n" || string(h2.Data) != "renders 3\n" {
		t.Errorf("opens read %q and %q (%v), want a rendering each", h1.Data, h2.Data, err)
	}
	if _, err := f.Open(n, OpenFlags{Write: true}, owner); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write-open: %v, want ErrReadOnly", err)
	}
}
