//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// supervisedEnv marks the serving daemon that a supervising main process
// started (supervise): it serves instead of supervising again.
const supervisedEnv = "TEMPLATEFS_SUPERVISED"

// superviseUnderSystemd reports whether this `templatefs mount` is the
// main process of a systemd service (NOTIFY_SOCKET is set) and not yet the
// serving daemon it starts.
//
// Why a child: systemd starts a service again only once its main process
// has exited, but a stopping daemon keeps serving the payload files that
// clones have open, for as long as they have them open. So under systemd
// the main process only supervises, and the serving daemon is its child;
// the main process exits as soon as the child has released the store,
// and with KillMode=process in the unit systemd leaves the child serving
// its open files while it starts the next daemon (docs/systemd.md).
func superviseUnderSystemd() bool {
	return os.Getenv("NOTIFY_SOCKET") != "" && os.Getenv(supervisedEnv) == ""
}

// supervise runs this same command line as a child process (the serving
// daemon), marked by supervisedEnv and with NOTIFY_SOCKET pointing at a
// private socket of this process. It relays every notification the child
// sends (READY=1, STOPPING=1, STATUS=) to systemd's NOTIFY_SOCKET, passes
// SIGINT and SIGTERM on to the child, which runs in its own process
// group (so a terminal's Ctrl-C reaches it once, through here), and
// returns once the child reports that it has released the store
// (notifyReleased), or when the child exits first, with its failure (none
// if the signal passed on ended it before it could catch signals).
func supervise() error {
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: fmt.Sprintf("@templatefs-supervise-%d", os.Getpid()), Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("supervise: notification socket: %w", err)
	}
	defer sock.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("supervise: %w", err)
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)

	child := exec.Command(exe, os.Args[1:]...)
	child.Env = append(withoutEnv(os.Environ(), "NOTIFY_SOCKET"), "NOTIFY_SOCKET="+sock.LocalAddr().String(), supervisedEnv+"=1")
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		return fmt.Errorf("supervise: start the serving daemon: %w", err)
	}
	slog.Info("supervising the serving daemon", "pid", child.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	released := make(chan struct{})
	go relay(sock, released)
	forwarded := false
	for {
		select {
		case s := <-sig:
			slog.Info("passing the signal on to the serving daemon", "signal", s.String(), "pid", child.Process.Pid)
			child.Process.Signal(s)
			forwarded = true
		case <-released:
			slog.Info("the serving daemon has released the store; it keeps serving open files in the background", "pid", child.Process.Pid)
			return nil
		case err := <-exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				return err
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && forwarded && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGINT) {
				return nil // signalled before it caught signals: it had no mount yet, and its lock died with it
			}
			return fmt.Errorf("the serving daemon (pid %d) %v", child.Process.Pid, ee.ProcessState)
		}
	}
}

// relay passes each datagram read from sock on to systemd's NOTIFY_SOCKET
// and closes released at the first holding notifyReleased. It returns when
// sock is closed.
func relay(sock *net.UnixConn, released chan<- struct{}) {
	buf := make([]byte, 64<<10)
	closed := false
	for {
		n, _, err := sock.ReadFromUnix(buf)
		if err != nil {
			return
		}
		msg := string(buf[:n])
		notify(msg)
		if !closed && strings.Contains("\n"+msg+"\n", "\n"+notifyReleased+"\n") {
			close(released)
			closed = true
		}
	}
}

// withoutEnv returns env without the variable name.
func withoutEnv(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}
