//go:build linux

package main

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// fusermountFailed is how go-fuse (fuse/mount_linux.go) reports a failed
// fusermount3 run, followed by the raw wait status (256 for exit status 1).
const fusermountFailed = "fusermount exited with code "

// explainMountError turns go-fuse's error for a failed mount of mnt into
// one that says what failed and what to do. As root go-fuse calls mount(2)
// itself and falls back to the fusermount3 helper; the helper writes its
// own reason to stderr, and go-fuse reports only its wait status. Other
// errors are returned wrapped, naming mnt.
func explainMountError(mnt string, err error) error {
	var execErr *exec.Error
	if errors.As(err, &execErr) {
		return fmt.Errorf("mount %s: FUSE helper %s not found (%v): install fuse3 (Debian package fuse3)", mnt, execErr.Name, execErr.Err)
	}
	code, ok := strings.CutPrefix(strings.TrimSpace(err.Error()), fusermountFailed)
	if !ok {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	how := "exit code " + code
	if n, perr := strconv.ParseUint(code, 10, 32); perr == nil {
		switch ws := syscall.WaitStatus(n); {
		case ws.Exited():
			how = fmt.Sprintf("exit status %d", ws.ExitStatus())
		case ws.Signaled():
			how = "killed by " + ws.Signal().String()
		}
	}
	return fmt.Errorf("mount %s: fusermount3 failed (%s; its reason, if it gave one, is the line above). "+
		"Check that /dev/fuse exists and that you may open it (modprobe fuse; a container needs the device passed in), "+
		"that fuse3 is installed, that you may write to %s, and, for --allow-other without root, "+
		"that /etc/fuse.conf has user_allow_other", mnt, how, mnt)
}
