package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"templatefs/internal/metrics"
	"templatefs/store"
)

// metricsPath is where --metrics-listen serves the metrics.
const metricsPath = "/metrics"

// metricsTimeout bounds reading a request's headers and writing its
// response on the metrics endpoint, so a stalled client cannot hold a
// stopping daemon.
const metricsTimeout = 30 * time.Second

// countStates makes m show st's leases and generations by state, read at
// each scrape from the counts the store keeps from its commits
// (store.Store.StateCountsIfReady), and starts the one walk of the
// records that makes them ready, in the background: at 1M leases it
// takes tens of seconds, which neither the mount nor a scrape waits for.
// It returns the stop that interrupts the walk and waits for it.
func countStates(m *metrics.Metrics, st *store.Store) (stop func(), err error) {
	err = m.CountStates(func() (map[string]int64, map[string]int64, bool) {
		c, ok := st.StateCountsIfReady()
		if !ok {
			return nil, nil, false
		}
		leases, gens := map[string]int64{}, map[string]int64{}
		for s, n := range c.Leases {
			leases[string(s)] = n
		}
		for s, n := range c.Generations {
			gens[string(s)] = n
		}
		return leases, gens, true
	})
	if err != nil {
		return nil, err
	}
	walked := make(chan struct{})
	go func() {
		defer close(walked)
		start := time.Now()
		if _, err := st.StateCounts(); err != nil {
			if !errors.Is(err, store.ErrInterrupted) {
				slog.Error("leases and generations by state are not counted; their metrics stay absent", "err", err)
			}
			return
		}
		slog.Info("counted leases and generations by state", "took", time.Since(start).Round(time.Millisecond).String())
	}()
	return func() { st.Interrupt(); <-walked }, nil
}

// listenMetrics serves m at http://addr/metrics (GET) until stop, which
// waits for a scrape in flight: the daemon calls it before the store
// closes. Errors: the listen's (a bad address, a port in use).
func listenMetrics(addr string, m *metrics.Metrics) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+metricsPath, m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsTimeout, WriteTimeout: metricsTimeout}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	slog.Info("serving metrics", "url", "http://"+ln.Addr().String()+metricsPath)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), metricsTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}, nil
}
