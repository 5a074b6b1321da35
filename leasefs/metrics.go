package leasefs

import (
	"fmt"

	"templatefs/internal/hostclock"
)

// MetricsFileName is the root file that shows the daemon's metrics in the
// Prometheus text exposition format (docs/metrics.md), rendered at each
// open from Options.Metrics, so one read of it is one consistent scrape.
// It exists only when Options.Metrics is set. Like EventsFileName the
// root does not list it: it changes at every read (each read is itself
// counted), so a backup of the mount would never be unchanged. Lookup
// finds it by name.
const MetricsFileName = "metrics"

// InoMetrics is the metrics file's fixed inode number (class 0).
const InoMetrics = 11

// Observer is told of what leasefs does, for metrics (cmd/templatefs
// feeds internal/metrics from it). Its methods must be cheap and safe for
// concurrent use; they decide nothing.
type Observer interface {
	// Refused counts one refusal that FS.Refuse logged: errno is its name
	// (EPERM), reason the name of the error table row it matched
	// (store.ErrTombstoned, as docs/errno.md lists them), or "unmatched"
	// for an error without a row (answered EIO).
	Refused(errno, reason string)
}

// unmatchedReason is the reason label of an error without a table row.
const unmatchedReason = "unmatched"

// absent reports whether fixed node kind k is missing from this FS: the
// metrics file without Options.Metrics.
func (f *FS) absent(k Kind) bool { return k == KindMetricsFile && f.metrics == nil }

// metricsView renders the metrics file now, with now as its times (what
// it shows is as of now). Errors: the renderer's, and store.ErrNotFound
// (wrapped) when the FS has none.
func (f *FS) metricsView(Node) (view, error) {
	if f.metrics == nil {
		return view{}, notFound(f.Root(), MetricsFileName)
	}
	text, err := f.metrics()
	if err != nil {
		return view{}, fmt.Errorf("render %s: %w", MetricsFileName, err)
	}
	v := at(hostclock.Now())
	v.text = text
	return v, nil
}
