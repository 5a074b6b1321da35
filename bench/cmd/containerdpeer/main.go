//go:build linux

// Command containerdpeer is bench/run's containerd peer: it runs Debian's
// containerd (package containerd, /usr/bin/containerd) on a private socket
// with its root and state under a directory of the bench's, and creates
// leases through containerd's own Go client, as a user of containerd's
// leases API does. Figures go to stdout as bare numbers (bench/run names
// them); notes go to stderr.
//
//	containerdpeer serve DIR                              start containerd under DIR, print "serving SOCKET" once its leases API answers, stop it on SIGTERM or SIGINT
//	containerdpeer create SOCKET CALLERS COUNT PREFIX     COUNT leases PREFIX-<i> from CALLERS goroutines: leases/s
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"templatefs/bench/internal/cli"
)

func main() {
	if len(os.Args) < 2 {
		cli.Fail(errors.New("usage: containerdpeer serve DIR | create SOCKET CALLERS COUNT PREFIX"))
	}
	args := os.Args[2:]
	var err error
	switch cmd := os.Args[1]; cmd {
	case "serve":
		err = cli.WithArgs(args, 1, func() error { return serve(args[0]) })
	case "create":
		err = cli.WithArgs(args, 4, func() error { return create(args[0], args[1], args[2], args[3]) })
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		cli.Fail(err)
	}
}

// serve runs containerd under dir until SIGTERM or SIGINT, then stops it.
func serve(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	d, err := startContainerd(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Printf("serving %s\n", d.Socket)
	select {
	case <-ctx.Done():
	case <-d.Exited():
	}
	return d.Stop()
}

// create prints the rate of creating count leases prefix-<i> through the
// containerd serving socket, from callers goroutines.
func create(socket, callersArg, countArg, prefix string) error {
	callers, err := cli.Count(callersArg)
	if err != nil {
		return err
	}
	n, err := cli.Count(countArg)
	if err != nil {
		return err
	}
	rate, err := createLeases(context.Background(), socket, callers, n, prefix)
	if err != nil {
		return err
	}
	fmt.Printf("%.1f\n", rate)
	return nil
}
