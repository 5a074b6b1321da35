//go:build windows || (linux && cgo && fuse3)

package main

import "templatefs/winfsp"

// cgofuseOptions is what cfg asks of a cgofuse mount, with cgofuse's own
// signal handler off when ownSignals (winfsp.MountOptions.OwnSignals).
func cgofuseOptions(cfg mountConfig, ownSignals bool) winfsp.MountOptions {
	o := winfsp.MountOptions{AllowOther: cfg.allowOther, Debug: cfg.debug, OwnSignals: ownSignals}
	if cfg.metrics != nil {
		o.Observer = cfg.metrics.Backend(backendCgofuse)
	}
	return o
}
