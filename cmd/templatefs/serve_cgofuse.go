//go:build windows

package main

import (
	"log/slog"

	"templatefs/leasefs"
	"templatefs/winfsp"
)

// serveCgofuse serves lfs at mnt through cgofuse (WinFsp on Windows,
// libfuse3 on Linux) until it is unmounted or signalled.
func serveCgofuse(lfs *leasefs.FS, mnt string, cfg mountConfig, ready func()) error {
	if cfg.noPassthrough {
		slog.Info("--no-passthrough has no effect with cgofuse: it has no passthrough")
	}
	return winfsp.Serve(mnt, lfs, cgofuseOptions(cfg, false), ready)
}
