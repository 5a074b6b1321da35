//go:build linux

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// namespace holds the bench's leases in containerd.
const namespace = "templatefs-bench"

// ping lists the leases once: nil when containerd's leases API answers.
func ping(ctx context.Context, socket string) error {
	c, err := client.New(socket, client.WithTimeout(time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(ctx, namespace), time.Second)
	defer cancel()
	_, err = c.LeasesService().List(ctx)
	return err
}

// createLeases creates n leases prefix-<i> through the containerd on
// socket, one client shared by callers goroutines (each Create is one
// gRPC call, durable in containerd's meta.db when it returns), and
// returns leases/s. Any failed create fails the run.
func createLeases(ctx context.Context, socket string, callers, n int, prefix string) (float64, error) {
	c, err := client.New(socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, namespace)
	ls := c.LeasesService()
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				id := fmt.Sprintf("%s-%07d", prefix, i)
				if _, err := ls.Create(ctx, leases.WithID(id)); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("create lease %s: %w", id, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
