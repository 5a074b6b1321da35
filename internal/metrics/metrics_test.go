package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("not Prometheus text: %v\n%s", err, text)
	}
	return fams
}

func names(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for n := range fams {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestRenderAndHandler: Render and the HTTP handler serve the same
// families from one registry, including a collector another package
// registered and the counts by state once their source is ready.
func TestRenderAndHandler(t *testing.T) {
	m := New()
	ready := false
	if err := m.CountStates(func() (map[string]int64, map[string]int64, bool) {
		return map[string]int64{"reserved": 2}, map[string]int64{"published": 1}, ready
	}); err != nil {
		t.Fatal(err)
	}
	fleet := prometheus.NewGauge(prometheus.GaugeOpts{Name: "templatefs_fleet_connected", Help: "test"})
	if err := m.Register(fleet); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(fleet); err == nil {
		t.Error("registering a collector twice succeeded")
	}
	m.LeaseOp("create", time.Millisecond, nil)
	m.Refused("EPERM", "store.ErrTombstoned")
	m.Backend("go-fuse").FUSEOp("lookup")

	text, err := m.Render()
	if err != nil {
		t.Fatal(err)
	}
	fams := parse(t, string(text))
	if fams["templatefs_leases"] != nil || fams["templatefs_state_counts_ready"].GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Errorf("counts shown before their source is ready:\n%s", text)
	}
	ready = true
	text, _ = m.Render()
	fams = parse(t, string(text))
	for _, name := range []string{"templatefs_leases", "templatefs_generations", "templatefs_fleet_connected", "templatefs_refusals_total",
		"templatefs_fuse_operations_total", "templatefs_lease_operation_duration_seconds", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("no family %s:\n%s", name, text)
		}
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(parse(t, string(body))), names(fams); !slices.Equal(got, want) {
		t.Errorf("handler serves %v, Render %v", got, want)
	}
}
