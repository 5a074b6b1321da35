package main

import (
	"log/slog"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Notifications a serving daemon sends to its service manager
// (sd_notify(3)) when NOTIFY_SOCKET is set; without it notify does
// nothing. notifyReleased is templatefs's own: it tells the supervising
// main process (supervise_linux.go) that the store lock is released, so
// the main process may exit and systemd start the next daemon; systemd
// ignores a variable it does not know.
const (
	notifyReady    = sd.SdNotifyReady
	notifyStopping = sd.SdNotifyStopping
	notifyReleased = "X_TEMPLATEFS_RELEASED=1"
)

// notify sends lines (one datagram, newline-separated) to NOTIFY_SOCKET,
// if set. A failure is logged, never fatal: the mount serves anyway.
func notify(lines ...string) {
	state := ""
	for i, l := range lines {
		if i > 0 {
			state += "\n"
		}
		state += l
	}
	if _, err := sd.SdNotify(false, state); err != nil {
		slog.Warn("sd_notify failed", "state", state, "err", err)
	}
}
