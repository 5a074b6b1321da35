// Package metrics is the daemon's Prometheus registry: every metric
// templatefs exposes (docs/metrics.md), rendered as the text exposition
// format for MNT/metrics (Render) and served over HTTP for `templatefs
// mount --metrics-listen` (Handler). Both read the same registry, so they
// serve the same families.
//
// It records and decides nothing itself: the store, leasefs and the FUSE
// adapters report what happens through their own small observer
// interfaces, whose methods Metrics and Backend have, and cmd/templatefs
// wires them together. It imports none of them (internal packages do not
// import the store: they cross-build for macOS), so counts kept by the
// store come in through StateSource.
package metrics

import (
	"bytes"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// namespace prefixes every templatefs metric.
const namespace = "templatefs"

// Buckets of the latency histograms, in seconds: from a group-committed
// lease (a fraction of a millisecond) to a stuck disk (seconds).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// publicationBuckets are for publications, in seconds: from a small
// capture to many GiB copied and hashed.
var publicationBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// batchBuckets are for the requests in one group commit (at most 1000).
var batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000}

// leaseOps are the lease operations the store reports (store.Observer).
var leaseOps = []string{"create", "bind", "release"}

// Metrics is the registry and the metrics templatefs feeds. It is safe
// for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	leaseOps       *prometheus.HistogramVec
	groupCommits   prometheus.Histogram
	indexCommits   prometheus.Histogram
	refusals       *prometheus.CounterVec
	fuseOps        *prometheus.CounterVec
	passthrough    *prometheus.GaugeVec
	publishedBytes prometheus.Counter
	publications   prometheus.Histogram
	eventsDropped  prometheus.Counter
}

// New returns a registry holding every templatefs metric, and the Go
// runtime's and the process's own (go_*, process_*).
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.leaseOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "lease_operation_duration_seconds",
		Help:    "Time a lease create, bind or release took in the store, by operation and result (ok: durable; error: refused or failed).",
		Buckets: latencyBuckets,
	}, []string{"op", "result"})
	for _, op := range leaseOps {
		for _, result := range []string{"ok", "error"} {
			m.leaseOps.WithLabelValues(op, result) // shown from the start, at 0
		}
	}
	m.groupCommits = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "group_commit_requests",
		Help:    "Lease acquisitions that shared one committed index transaction (group commit batch size).",
		Buckets: batchBuckets,
	})
	m.indexCommits = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "index_commit_duration_seconds",
		Help:    "Time one committed index write transaction spent in its commit: bbolt's page writes and fdatasyncs.",
		Buckets: latencyBuckets,
	})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "refusals_total",
		Help: "Refused operations on the mount, by errno and reason (the error table row, docs/errno.md; unmatched: none, answered EIO).",
	}, []string{"errno", "reason"})
	m.fuseOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "fuse_operations_total",
		Help: "FUSE requests the daemon answered, by backend (go-fuse, cgofuse) and operation.",
	}, []string{"backend", "op"})
	m.passthrough = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "passthrough_active",
		Help: "1 when the mount serves payload reads with FUSE passthrough (the kernel reads the backing file), 0 when they reach the daemon, by backend.",
	}, []string{"backend"})
	m.publishedBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "publication_bytes_total",
		Help: "Logical bytes of the artifacts of every generation published by this daemon.",
	})
	m.publications = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "publication_duration_seconds",
		Help:    "Time each publication that made a new generation took, from opening the capture to its commit.",
		Buckets: publicationBuckets,
	})
	m.eventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "events_dropped_total",
		Help: "Events dropped for readers of MNT/events that fell more than 4096 events behind (each reader's loss counts).",
	})
	m.reg.MustRegister(m.leaseOps, m.groupCommits, m.indexCommits, m.refusals, m.fuseOps, m.passthrough,
		m.publishedBytes, m.publications, m.eventsDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register adds c to the registry, so its metrics appear in every scrape
// (other packages' own gauges, such as a fleet connection's state).
// Errors: prometheus.AlreadyRegisteredError and the registry's other
// errors for a collector that clashes with one registered.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// Render gathers every metric once and returns the text exposition
// format (version 0.0.4), the content of MNT/metrics: one consistent
// scrape. Errors: a collector's (the store's counts unreadable).
func (m *Metrics) Render() ([]byte, error) {
	families, err := m.reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// Handler serves the registry for GET /metrics (promhttp: text, or
// whichever format the scraper asks for), with at most one scrape at a
// time.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 1, ErrorHandling: promhttp.HTTPErrorOnError})
}

// LeaseOp records one lease operation of the store (store.Observer).
func (m *Metrics) LeaseOp(op string, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.leaseOps.WithLabelValues(op, result).Observe(d.Seconds())
}

// GroupCommit records the size of one committed group (store.Observer).
func (m *Metrics) GroupCommit(requests int) { m.groupCommits.Observe(float64(requests)) }

// IndexCommit records one index commit's time (store.Observer).
func (m *Metrics) IndexCommit(d time.Duration) { m.indexCommits.Observe(d.Seconds()) }

// Published records one publication (store.Observer).
func (m *Metrics) Published(bytes int64, d time.Duration) {
	m.publishedBytes.Add(float64(bytes))
	m.publications.Observe(d.Seconds())
}

// EventsDropped counts events dropped for slow readers (store.Observer).
func (m *Metrics) EventsDropped(n int) { m.eventsDropped.Add(float64(n)) }

// Refused counts one refused operation (leasefs.Observer): errno is its
// name (EPERM), reason the error table row it matched
// (store.ErrTombstoned), "unmatched" for none.
func (m *Metrics) Refused(errno, reason string) { m.refusals.WithLabelValues(errno, reason).Inc() }

// Backend returns the recorder of one FUSE backend's requests.
func (m *Metrics) Backend(name string) *Backend {
	b := &Backend{m: m, name: name}
	m.passthrough.WithLabelValues(name).Set(0)
	return b
}

// Backend records the requests of one FUSE backend (the fs and winfsp
// observers).
type Backend struct {
	m    *Metrics
	name string
}

// FUSEOp counts one request of operation op ("lookup", "read").
func (b *Backend) FUSEOp(op string) { b.m.fuseOps.WithLabelValues(b.name, op).Inc() }

// Passthrough records whether the backend serves payload reads with FUSE
// passthrough.
func (b *Backend) Passthrough(active bool) {
	v := 0.0
	if active {
		v = 1
	}
	b.m.passthrough.WithLabelValues(b.name).Set(v)
}

// StateSource returns the current count of leases and of generations by
// state name, or ready false while they are not known yet (the store's
// first walk of its records runs). It is called once per scrape, so it
// must neither read the whole index nor wait (the store keeps these
// counts from its commits).
type StateSource func() (leases, generations map[string]int64, ready bool)

// CountStates registers the gauges of leases and generations by state,
// read from src at each scrape, and templatefs_state_counts_ready.
// Errors: Register's.
func (m *Metrics) CountStates(src StateSource) error {
	return m.reg.Register(&stateCollector{src: src})
}

var (
	leasesDesc = prometheus.NewDesc(namespace+"_leases", "Leases in the store, by state (reserved, bound, releasing, teardown-failed, exited).",
		[]string{"state"}, nil)
	generationsDesc = prometheus.NewDesc(namespace+"_generations", "Generations in the store, by state (published, tombstoned, retiring).",
		[]string{"state"}, nil)
	readyDesc = prometheus.NewDesc(namespace+"_state_counts_ready",
		"1 once templatefs_leases and templatefs_generations are shown: the daemon's one walk of the records at start has finished; 0 before, while they are absent.", nil, nil)
)

// stateCollector turns a StateSource into the gauges.
type stateCollector struct{ src StateSource }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leasesDesc
	ch <- generationsDesc
	ch <- readyDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	leases, gens, ready := c.src()
	if !ready {
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, 1)
	for state, n := range leases {
		ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, float64(n), state)
	}
	for state, n := range gens {
		ch <- prometheus.MustNewConstMetric(generationsDesc, prometheus.GaugeValue, float64(n), state)
	}
}
