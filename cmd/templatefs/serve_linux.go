//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/fs"
	"templatefs/leasefs"
)

// defaultBackend is go-fuse on Linux: passthrough, notify and kernel
// caching (docs/windows.md says why cgofuse is not the default here).
const defaultBackend = backendGoFuse

// serve mounts lfs at mnt with cfg's backend, calls ready, and serves
// until SIGINT or SIGTERM. A mountpoint left behind by a killed daemon
// (ENOTCONN) is detached first.
// On a signal the mount is unmounted cleanly when nothing holds it open and
// lazily otherwise; serve then waits until the kernel lets go. The signals
// are caught from before the mount appears, so one that arrives while
// mounting unmounts too instead of killing the process and leaving a dead
// mount.
func serve(lfs *leasefs.FS, mnt string, cfg mountConfig, ready func()) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if _, err := os.Stat(mnt); isDeadMount(err) {
		slog.Warn("mountpoint is a dead mount left by a killed daemon; detaching it", "mountpoint", mnt)
		if err := detach(mnt); err != nil {
			return fmt.Errorf("detach dead mount %s: %w", mnt, err)
		}
	}
	if cfg.backend == backendCgofuse {
		signal.Stop(sig) // cgofuse unmounts on SIGINT and SIGTERM itself on Linux
		return serveCgofuse(lfs, mnt, cfg, ready)
	}
	srv, err := fs.Mount(mnt, lfs, fs.MountOptions{AllowOther: cfg.allowOther, Debug: cfg.debug, NoPassthrough: cfg.noPassthrough})
	if err != nil {
		return explainMountError(mnt, err)
	}
	slog.Info("mounted", "backend", backendGoFuse, "mountpoint", mnt)
	ready()

	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		slog.Info("mount ended by an external unmount", "mountpoint", mnt)
		return nil
	case s := <-sig:
		lfs.EndEvents() // a reader blocked on MNT/events gets EOF and lets the mount go
		unmount(srv, mnt, s)
	}
	<-done
	slog.Info("unmounted", "mountpoint", mnt)
	return nil
}

func unmount(srv *fuse.Server, mnt string, s os.Signal) {
	err := srv.Unmount()
	if err == nil {
		slog.Info("unmounting cleanly", "signal", s.String(), "mountpoint", mnt)
		return
	}
	slog.Warn("mount is busy; detaching lazily, open files keep working until closed",
		"signal", s.String(), "mountpoint", mnt, "reason", err)
	if err := detach(mnt); err != nil {
		slog.Error("lazy unmount failed", "mountpoint", mnt, "err", err)
	}
}

// isDeadMount reports whether err, from a stat of a mountpoint, says a
// killed daemon left its mount behind ("Transport endpoint is not
// connected").
func isDeadMount(err error) bool { return errors.Is(err, syscall.ENOTCONN) }

// checkMountpointDir refuses a mountpoint that is not a directory, or on
// which a file system (another templatefs, say) is mounted and alive: a
// new mount would stack on it and hide it. A dead mount left by a killed
// daemon passes, since serve detaches it. A mountpoint has another device
// than its parent.
func checkMountpointDir(mnt string) error {
	var st, parent unix.Stat_t
	err := unix.Stat(mnt, &st)
	switch {
	case isDeadMount(err):
		return nil
	case err != nil:
		return fmt.Errorf("mountpoint %s: %w", mnt, err)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("mountpoint %s is not a directory", mnt)
	}
	if err := unix.Stat(filepath.Dir(mnt), &parent); err != nil {
		return fmt.Errorf("mountpoint %s: %w", mnt, err)
	}
	if mnt != "/" && st.Dev != parent.Dev {
		return fmt.Errorf("mountpoint %s already has a file system mounted on it: unmount it or choose another directory", mnt)
	}
	return nil
}

// detach lazily unmounts mnt: umount2(MNT_DETACH) as root, fusermount3 -uz
// otherwise.
func detach(mnt string) error {
	if os.Geteuid() == 0 {
		return unix.Unmount(mnt, unix.MNT_DETACH)
	}
	out, err := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 -u -z: %w: %s", err, out)
	}
	return nil
}
