package main

import "fmt"

// defaultBackend is cgofuse over WinFsp: the only backend on Windows.
const defaultBackend = backendCgofuse

// isDeadMount is false on Windows: WinFsp removes a dead process's mount.
func isDeadMount(error) bool { return false }

// checkMountpointDir accepts anything: on Windows the mountpoint is a
// drive letter or a directory that must not exist yet, and WinFsp refuses
// an occupied one itself.
func checkMountpointDir(string) error { return nil }

// serve mounts lfs at mnt (a directory or a drive letter such as T:)
// through WinFsp, calls ready, and serves until Ctrl-C or an unmount.
func serve(d *daemon, mnt string, cfg mountConfig, ready func()) error {
	if cfg.backend != backendCgofuse {
		return usagef("--backend %s: Windows has only %s (WinFsp)", cfg.backend, backendCgofuse)
	}
	if err := serveCgofuse(d.lfs, mnt, cfg, ready); err != nil {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	return nil
}
