//go:build linux

package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"templatefs/tests/harness"
)

// TestMetrics mounts a real store with each backend and --metrics-listen
// on a free loopback port: `cat MNT/metrics` parses as Prometheus text,
// the HTTP endpoint serves the same families, and the values follow what
// is done through the mount (a lease created, a refused mkdir, the FUSE
// requests they took).
func TestMetrics(t *testing.T) {
	backends := []string{backendGoFuse}
	if harness.Cgofuse {
		backends = append(backends, backendCgofuse)
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { testMetrics(t, b) })
	}
}

func testMetrics(t *testing.T, backend string) {
	harness.RequireFUSE(t)
	dir := t.TempDir()
	storeDir, mnt, capOut := filepath.Join(dir, "store"), filepath.Join(dir, "mnt"), filepath.Join(dir, "cap")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	harness.Run(t, "init", storeDir)
	harness.Run(t, "sample-capture", "--memory", "4MiB", capOut)
	lines := harness.Lines(harness.Run(t, "publish", "--class", filepath.Join(capOut, "class.json"), storeDir, filepath.Join(capOut, "capture")))
	gen := lines[len(lines)-1]
	d := harness.StartMount(t, storeDir, mnt, "--backend", backend, "--metrics-listen", "127.0.0.1:0")
	url := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(d.Log())
	if url == nil {
		t.Fatalf("daemon logged no metrics URL:\n%s", d.Log())
	}

	// The counts by state appear once the daemon's walk of the records
	// at start has finished.
	before := catMetrics(t, mnt)
	for deadline := time.Now().Add(harness.CommandTimeout); value(before, "templatefs_state_counts_ready") != 1; before = catMetrics(t, mnt) {
		if time.Now().After(deadline) {
			t.Fatalf("templatefs_state_counts_ready is not 1 after %v", harness.CommandTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	http1 := scrape(t, url[1])
	if got, want := familyNames(http1), familyNames(before); !slices.Equal(got, want) {
		t.Errorf("HTTP endpoint serves families %v, MNT/metrics %v", got, want)
	}
	for _, name := range []string{"templatefs_leases", "templatefs_generations", "templatefs_lease_operation_duration_seconds",
		"templatefs_index_commit_duration_seconds", "templatefs_fuse_operations_total", "templatefs_passthrough_active",
		"templatefs_publication_bytes_total", "templatefs_events_dropped_total"} {
		if before[name] == nil {
			t.Errorf("MNT/metrics has no family %s:\n%s", name, harness.MustTool(t, "cat", filepath.Join(mnt, "metrics")))
		}
	}
	if got := value(before, "templatefs_generations", "state", "published"); got != 1 {
		t.Errorf("templatefs_generations{state=published} = %v, want 1", got)
	}

	harness.MustTool(t, "touch", filepath.Join(mnt, "generations", gen, "leases", "clone-1"))
	if r := harness.Tool(t, "mkdir", filepath.Join(mnt, "generations", "not-a-generation-dir")); r.Code == 0 {
		t.Fatalf("mkdir under generations/ succeeded: %v", r)
	}

	after := catMetrics(t, mnt)
	changes := []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"templatefs_leases", []string{"state", "reserved"}, 1},
		{"templatefs_lease_operation_duration_seconds", []string{"op", "create", "result", "ok"}, 1},
		{"templatefs_refusals_total", []string{"errno", "EPERM", "reason", "leasefs.ErrNotPermitted"}, 1},
		{"templatefs_fuse_operations_total", []string{"backend", backend, "op", "mkdir"}, 1},
		{"templatefs_fuse_operations_total", []string{"backend", backend, "op", "create"}, 1},
	}
	for _, c := range changes {
		if got := value(after, c.name, c.labels...) - value(before, c.name, c.labels...); got != c.delta {
			t.Errorf("%s%v changed by %v, want %v", c.name, c.labels, got, c.delta)
		}
	}
	if got := value(scrape(t, url[1]), "templatefs_leases", "state", "reserved"); got != 1 {
		t.Errorf("HTTP: templatefs_leases{state=reserved} = %v after the create, want 1", got)
	}
	d.Stop()
}

// catMetrics reads MNT/metrics with cat and parses it.
func catMetrics(t *testing.T, mnt string) map[string]*dto.MetricFamily {
	t.Helper()
	return parseMetrics(t, "cat MNT/metrics", harness.MustTool(t, "cat", filepath.Join(mnt, "metrics")))
}

// scrape GETs url and parses the body.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v\n%s", url, resp.Status, err, body)
	}
	return parseMetrics(t, "GET "+url, string(body))
}

func parseMetrics(t *testing.T, what, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s does not parse as Prometheus text: %v\n%s", what, err, text)
	}
	return fams
}

func familyNames(fams map[string]*dto.MetricFamily) []string {
	var names []string
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// value is the value of family name's sample with the label pairs given
// (name, value, ...): a gauge's or counter's value, a histogram's count;
// 0 when there is no such sample.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}
