//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"templatefs/tests/harness"
)

// TestCreateLeasesThroughContainerd starts the real containerd the bench
// uses, from a temporary directory, creates leases through the peer's
// code, and finds exactly those leases in containerd's listing.
func TestCreateLeasesThroughContainerd(t *testing.T) {
	if _, err := exec.LookPath(Binary); err != nil {
		harness.SkipOrFail(t, "containerd not installed (Debian package containerd): %v", err)
	}
	if os.Geteuid() != 0 {
		harness.SkipOrFail(t, "containerd needs root")
	}
	ctx := context.Background()
	d, err := startContainerd(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})

	const callers, n = 3, 10
	rate, err := createLeases(ctx, d.Socket, callers, n, "t")
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Errorf("rate %v, want > 0", rate)
	}
	// The same IDs again: containerd refuses a lease that exists.
	if _, err := createLeases(ctx, d.Socket, 1, 1, "t"); err == nil {
		t.Error("creating lease t-0000000 a second time succeeded")
	}

	c, err := client.New(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	list, err := c.LeasesService().List(namespaces.WithNamespace(ctx, namespace))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, l := range list {
		got = append(got, l.ID)
	}
	for i := range n {
		want = append(want, fmt.Sprintf("t-%07d", i))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("leases %q, want %q", got, want)
	}
}
