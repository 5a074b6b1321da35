//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"templatefs/leasefs"
)

// Serve is `templatefs mount --backend cgofuse`: it mounts lfs at mnt
// (on Windows a directory that does not exist yet, or a drive letter such
// as "T:"), calls ready, and serves until SIGINT or SIGTERM (Ctrl-C or
// Ctrl-Break in a Windows console) or an external unmount, then unmounts.
// On Linux cgofuse itself unmounts on SIGINT and SIGTERM, so Serve only
// waits there: a second Unmount would race with cgofuse's Destroy.
// Errors: Mount's, or the FUSE loop's ErrMount.
func Serve(mnt string, lfs *leasefs.FS, opts MountOptions, ready func()) error {
	sig := make(chan os.Signal, 1)
	if runtime.GOOS == "windows" {
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
	}
	m, err := Mount(mnt, lfs, opts)
	if err != nil {
		return err
	}
	slog.Info("mounted", "backend", "cgofuse", "mountpoint", mnt)
	ready()
	ended := make(chan error, 1)
	go func() { ended <- m.Wait() }()
	select {
	case err := <-ended:
		if err != nil {
			return fmt.Errorf("serve %s: %w", mnt, err)
		}
		slog.Info("unmounted", "mountpoint", mnt)
		return nil
	case s := <-sig:
		slog.Info("unmounting", "signal", s.String(), "mountpoint", mnt)
		lfs.EndEvents() // a reader blocked on MNT/events gets EOF and lets the mount go
		return m.Unmount()
	}
}
