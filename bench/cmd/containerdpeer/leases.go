//go:build linux

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"templatefs/bench/internal/parallel"
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
	return parallel.Rate(callers, n, func(_, i int) error {
		id := fmt.Sprintf("%s-%07d", prefix, i)
		if _, err := ls.Create(ctx, leases.WithID(id)); err != nil {
			return fmt.Errorf("create lease %s: %w", id, err)
		}
		return nil
	})
}
