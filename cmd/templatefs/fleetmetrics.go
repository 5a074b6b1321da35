package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"templatefs/internal/fleet"
	"templatefs/internal/metrics"
)

// registerFleetMetrics adds the fleet membership's state to the daemon's
// metrics, read from m at each scrape: templatefs_fleet_connected (1
// while the watch is established and caught up, 0 while etcd is
// unreachable and the host serves with what it knows),
// templatefs_fleet_queued (this host's tombstones and lifts etcd does not
// have yet) and templatefs_fleet_revision (the etcd revision the store's
// fleet view reflects). Errors: the registry's, for a clashing name.
func registerFleetMetrics(reg *metrics.Metrics, m *fleet.Member) error {
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "templatefs_fleet_connected",
			Help: "1 while the fleet watch is established and caught up with etcd, 0 while disconnected."},
			func() float64 {
				if m.State().Connected {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "templatefs_fleet_queued",
			Help: "This host's tombstones and lifts queued in the store, not yet in etcd."},
			func() float64 { return float64(m.State().Queued) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "templatefs_fleet_revision",
			Help: "The etcd revision the store's fleet view reflects."},
			func() float64 { return float64(m.State().Revision) }),
	}
	for _, g := range gauges {
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}
