package store

import (
	"fmt"
	"strings"
	"time"

	"templatefs/store/manifest"
)

// fileStamp is what publication compares before and after reading an
// artifact: a writer that changes the file moves at least one of these.
type fileStamp struct {
	Size         int64
	Mtime, Ctime time.Time
}

// change describes how b differs from a, or returns "".
func (a fileStamp) change(b fileStamp) string {
	var d []string
	if a.Size != b.Size {
		d = append(d, fmt.Sprintf("size %d, then %d", a.Size, b.Size))
	}
	if !a.Mtime.Equal(b.Mtime) {
		d = append(d, fmt.Sprintf("mtime %s, then %s", a.Mtime.UTC().Format(time.RFC3339Nano), b.Mtime.UTC().Format(time.RFC3339Nano)))
	}
	if !a.Ctime.Equal(b.Ctime) {
		d = append(d, fmt.Sprintf("ctime %s, then %s", a.Ctime.UTC().Format(time.RFC3339Nano), b.Ctime.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(d, "; ")
}

// captureStamps returns the stamp of every file of c, in c.Files order.
func captureStamps(c *manifest.Capture) ([]fileStamp, error) {
	out := make([]fileStamp, len(c.Files))
	for i, f := range c.Files {
		st, err := stampOf(f.File)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// checkUnchanged returns ErrCaptureChanged naming the first file of c
// whose stamp differs from before, and what changed.
func checkUnchanged(c *manifest.Capture, before []fileStamp) error {
	after, err := captureStamps(c)
	if err != nil {
		return err
	}
	for i, f := range c.Files {
		if what := before[i].change(after[i]); what != "" {
			return fmt.Errorf("%w: %s: %s; publish it again once nothing writes to it", ErrCaptureChanged, f.Name, what)
		}
	}
	return nil
}
