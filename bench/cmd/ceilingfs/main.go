//go:build linux

// Command ceilingfs is the FUSE ceiling of bench/run: minimal go-fuse file
// systems (not templatefs) that show what FUSE itself allows on this
// machine, so each templatefs figure reads against it. It mounts, prints
// "mounted" on stdout once the mount serves, and unmounts on SIGTERM or
// SIGINT.
//
//	ceilingfs mem MNT COUNT       COUNT empty files ls-<i> in memory, one-hour entry and attribute timeouts, extended attributes off
//	ceilingfs loopback MNT DIR    go-fuse's loopback node over DIR (a tmpfs directory in the bench), the options of go-fuse's example/loopback
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"templatefs/bench/internal/cli"
)

func main() {
	if len(os.Args) != 4 {
		cli.Fail(errors.New("usage: ceilingfs mem MNT COUNT | loopback MNT DIR"))
	}
	mnt, arg := os.Args[2], os.Args[3]
	var srv *fuse.Server
	var err error
	switch cmd := os.Args[1]; cmd {
	case "mem":
		var n int
		if n, err = cli.Count(arg); err == nil {
			srv, err = mountMem(mnt, n)
		}
	case "loopback":
		srv, err = mountLoopback(mnt, arg)
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		cli.Fail(err)
	}
	fmt.Println("mounted")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		if err := srv.Unmount(); err != nil {
			fmt.Fprintf(os.Stderr, "ceilingfs: unmount %s: %v\n", mnt, err)
		}
	}()
	srv.Wait()
}

// mountOptions are templatefs' own FUSE mount options (fs/mount.go) where
// they change the cost of a request: the mount(2) call as root instead of
// fusermount3, and 1 MiB writes.
func mountOptions(name string) fuse.MountOptions {
	return fuse.MountOptions{
		FsName:      name,
		Name:        "ceilingfs",
		DirectMount: os.Geteuid() == 0,
		MaxWrite:    1 << 20,
	}
}
