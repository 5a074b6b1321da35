//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Binary is Debian's containerd (package containerd).
const Binary = "/usr/bin/containerd"

// disabledPlugins are the containerd 1.6 plugins a leases benchmark does not
// need: the CRI (which would want CNI and image settings), the snapshotters
// other than native (the metadata plugin needs at least one), runtimes,
// tasks and the restart monitor that needs them, tracing, and /opt. What remains is the content store, the bbolt
// metadata (meta.db, where leases live), its garbage collector, and the
// gRPC services.
var disabledPlugins = []string{
	"io.containerd.grpc.v1.cri",
	"io.containerd.snapshotter.v1.aufs",
	"io.containerd.snapshotter.v1.btrfs",
	"io.containerd.snapshotter.v1.devmapper",
	"io.containerd.snapshotter.v1.overlayfs",
	"io.containerd.snapshotter.v1.zfs",
	"io.containerd.runtime.v1.linux",
	"io.containerd.runtime.v2.task",
	"io.containerd.monitor.v1.cgroups",
	"io.containerd.service.v1.tasks-service",
	"io.containerd.grpc.v1.tasks",
	"io.containerd.internal.v1.opt",
	"io.containerd.internal.v1.restart",
	"io.containerd.internal.v1.tracing",
	"io.containerd.tracing.processor.v1.otlp",
}

// config is a containerd 1.6 configuration (version 2) that keeps
// everything under dir: root, state, the gRPC and ttrpc sockets.
func config(dir string) string {
	q := strconv.Quote
	s := "version = 2\n"
	s += "root = " + q(filepath.Join(dir, "root")) + "\n"
	s += "state = " + q(filepath.Join(dir, "state")) + "\n"
	s += "disabled_plugins = ["
	for i, p := range disabledPlugins {
		if i > 0 {
			s += ", "
		}
		s += q(p)
	}
	s += "]\n\n[grpc]\n  address = " + q(socketPath(dir)) + "\n"
	s += "\n[ttrpc]\n  address = " + q(socketPath(dir)+".ttrpc") + "\n"
	s += "\n[debug]\n  address = \"\"\n\n[metrics]\n  address = \"\"\n"
	return s
}

func socketPath(dir string) string { return filepath.Join(dir, "containerd.sock") }

// Containerd is a running containerd serving on Socket.
type Containerd struct {
	Socket string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how it exited, once exited is closed
}

// startContainerd writes dir/config.toml, starts containerd with it
// (log in dir/containerd.log), and returns once its leases API answers.
// It fails if containerd exits first or does not answer within 30 s, or
// ctx ends; containerd is then stopped. containerd is killed if this
// process dies (Pdeathsig).
func startContainerd(ctx context.Context, dir string) (*Containerd, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(config(dir)), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "containerd.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(Binary, "--config", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &Containerd{Socket: socketPath(dir), cmd: cmd, exited: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := ping(ctx, d.Socket)
		if err == nil {
			return d, nil
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("containerd exited before serving (%v); its log is %s", d.err, logPath)
		case <-ctx.Done():
			d.Stop()
			return nil, fmt.Errorf("containerd did not answer on %s: %v; its log is %s", d.Socket, err, logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Exited is closed once containerd has exited.
func (d *Containerd) Exited() <-chan struct{} { return d.exited }

// Stop sends containerd SIGTERM, waits up to 10 s for it to exit, then
// kills it. It returns an error if containerd had exited on its own.
func (d *Containerd) Stop() error {
	select {
	case <-d.exited:
		return fmt.Errorf("containerd exited: %v", d.err)
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		return errors.New("containerd did not exit within 10 s of SIGTERM; killed")
	}
	return nil
}
