//go:build linux && cgo && fuse3

package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
	"templatefs/winfsp"
)

// mountCgofuse mounts lfs at mnt through cgofuse over libfuse3, with
// cgofuse's own signal handler off: serve handles SIGINT and SIGTERM the
// same way for both backends.
func mountCgofuse(lfs *leasefs.FS, mnt string, cfg mountConfig) (mounted, error) {
	if cfg.noPassthrough {
		slog.Info("--no-passthrough has no effect with cgofuse: it has no passthrough")
	}
	m, err := winfsp.Mount(mnt, lfs, cgofuseOptions(cfg, true))
	if err != nil {
		return nil, err
	}
	c := &cgofuseMount{m: m, mnt: mnt, done: make(chan struct{})}
	go func() {
		if err := m.Wait(); err != nil {
			slog.Error("cgofuse loop ended with an error", "mountpoint", mnt, "err", err)
		}
		close(c.done)
	}()
	return c, nil
}

// cgofuseMount is a cgofuse mount on Linux. Its FUSE loop keeps serving a
// lazily detached mount until the kernel lets go; libfuse then finds the
// connection gone and unmounts nothing.
type cgofuseMount struct {
	m    *winfsp.Mounted
	mnt  string
	done chan struct{}
}

// unmount unmounts mnt without MNT_DETACH: umount2 as root, fusermount3
// -u otherwise; it fails while the mount is busy.
func (c *cgofuseMount) unmount() error {
	if os.Geteuid() == 0 {
		return unix.Unmount(c.mnt, 0)
	}
	if out, err := exec.Command("fusermount3", "-u", c.mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("fusermount3 -u: %w: %s", err, out)
	}
	return nil
}

func (c *cgofuseMount) ended() <-chan struct{} { return c.done }
func (c *cgofuseMount) openFiles() (int, int)  { return c.m.OpenFiles() }
