//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/fs"
	"templatefs/internal/mountinfo"
	"templatefs/leasefs"
)

// defaultBackend is go-fuse on Linux: passthrough, notify and kernel
// caching (docs/windows.md says why cgofuse is not the default here).
const defaultBackend = backendGoFuse

// idlePoll is how often a stopping daemon told to exit (a second signal)
// checks whether it still serves an open file.
const idlePoll = 100 * time.Millisecond

// mounted is a serving mount of either backend.
type mounted interface {
	// unmount unmounts cleanly; it fails (EBUSY) while files are open.
	unmount() error
	// ended is closed once the kernel has let go of the mount: the last
	// file open in a detached mount is closed, or it was unmounted.
	ended() <-chan struct{}
	// openFiles counts the open file handles: payloads, and the others.
	openFiles() (payload, other int)
}

// serve mounts d's namespace at mnt with cfg's backend, calls ready, and
// serves until SIGINT or SIGTERM or an external unmount. A mountpoint left
// behind by a killed daemon (ENOTCONN) is detached first. The signals are
// caught from before the mount appears, so one that arrives while
// mounting stops the daemon too instead of killing the process and
// leaving a dead mount.
//
// The restart model (docs/systemd.md): at the first signal the daemon
// stops taking operations, unmounts (lazily, when files are open) and
// releases the store at once (daemon.release: leasefs detached, store and
// lock closed), so a new daemon can mount the same store on the same
// mountpoint while clones keep reading the payload files they have open.
// The old daemon serves those reads, and nothing else, until the kernel
// lets go of the detached mount. Every further signal is logged at once
// with what the daemon still waits for (the stops still running, such as
// control operations in flight, and the open files) and makes it exit as
// soon as the store is released and no file of the mount is open.
func serve(d *daemon, mnt string, cfg mountConfig, ready func()) error {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if _, err := os.Stat(mnt); isDeadMount(err) {
		slog.Warn("mountpoint is a dead mount left by a killed daemon; detaching it", "mountpoint", mnt)
		if err := detach(mnt); err != nil {
			return fmt.Errorf("detach dead mount %s: %w", mnt, err)
		}
	}
	m, err := mount(d.lfs, mnt, cfg, &d.told)
	if err != nil {
		return err
	}
	dev := mountDev(mnt)
	slog.Info("mounted", "backend", cfg.backend, "mountpoint", mnt)
	ready()
	notify(notifyReady, "STATUS=serving "+mnt)

	select {
	case <-m.ended():
		slog.Info("mount ended by an external unmount", "mountpoint", mnt)
		return nil
	case s := <-sig:
		notify(notifyStopping, "STATUS=stopping on "+s.String())
		d.lfs.EndEvents() // a reader blocked on MNT/events gets EOF and lets the mount go
		released := make(chan error, 1)
		go func() {
			unmount(m, mnt, dev, s)
			released <- d.release()
		}()
		again := false
		for waiting := true; waiting; {
			select {
			case err := <-released:
				waiting = false
				if err == nil {
					slog.Info("store released: a new daemon may open it", "store", d.st.Dir())
				}
			case s := <-sig:
				again = true
				steps := d.waitingFor()
				if len(steps) == 0 {
					steps = []string{"the unmount"} // release has not started yet
				}
				logStillWaiting(m, mnt, s, steps)
			}
		}
		notify(notifyReleased, "STATUS=store released; serving the payload files still open")
		return drain(m, mnt, sig, again)
	}
}

// logStillWaiting logs a further signal s of a stopping daemon: what it
// still waits for before the store is released (steps, from
// daemon.waitingFor), and the files of the mount still open.
func logStillWaiting(m mounted, mnt string, s os.Signal, steps []string) {
	payload, other := m.openFiles()
	msg := fmt.Sprintf("stopping: still serving %d open payload files and %d other open files; exiting when none is open", payload, other)
	status := fmt.Sprintf("STATUS=store released; waiting for %d open payload files", payload)
	if len(steps) > 0 {
		msg = fmt.Sprintf("stopping: waiting for %s to stop before releasing the store; still serving %d open payload files and %d other open files; exiting when none is open",
			strings.Join(steps, ", "), payload, other)
		status = "STATUS=stopping; waiting for " + strings.Join(steps, ", ")
	}
	slog.Warn(msg, "signal", s.String(), "mountpoint", mnt)
	notify(status)
}

// mount mounts lfs at mnt with cfg's backend; a go-fuse mount sets t.
func mount(lfs *leasefs.FS, mnt string, cfg mountConfig, t *told) (mounted, error) {
	if cfg.backend == backendCgofuse {
		return mountCgofuse(lfs, mnt, cfg)
	}
	m := &goFuseMount{done: make(chan struct{})}
	coherence := &fs.Coherence{}
	opts := fs.MountOptions{AllowOther: cfg.allowOther, Debug: cfg.debug, NoPassthrough: cfg.noPassthrough, OpenFiles: &m.open, Coherence: coherence}
	if cfg.metrics != nil {
		opts.Observer = cfg.metrics.Backend(backendGoFuse)
	}
	srv, err := fs.Mount(mnt, lfs, opts)
	if err != nil {
		return nil, explainMountError(mnt, err)
	}
	m.srv = srv
	do := coherence.Do
	t.do.Store(&do)
	go func() { srv.Wait(); close(m.done) }()
	return m, nil
}

// goFuseMount is a go-fuse mount.
type goFuseMount struct {
	srv  *fuse.Server
	done chan struct{}
	open fs.OpenFiles
}

func (m *goFuseMount) unmount() error         { return m.srv.Unmount() }
func (m *goFuseMount) ended() <-chan struct{} { return m.done }
func (m *goFuseMount) openFiles() (int, int)  { return int(m.open.Payload()), int(m.open.Other()) }

// unmount unmounts m cleanly when nothing holds it open and lazily
// otherwise, and makes sure the mount at mnt is no longer the one with
// device dev (cgofuse also detaches lazily on the signal, by itself).
func unmount(m mounted, mnt, dev string, s os.Signal) {
	err := m.unmount()
	if err == nil {
		slog.Info("unmounting cleanly", "signal", s.String(), "mountpoint", mnt)
		return
	}
	if dev == "" || mountDev(mnt) == dev {
		slog.Warn("mount is busy; detaching lazily, open files keep working until closed",
			"signal", s.String(), "mountpoint", mnt, "reason", err)
		if err := detach(mnt); err != nil && mountDev(mnt) == dev {
			slog.Error("lazy unmount failed", "mountpoint", mnt, "err", err)
		}
	}
}

// drain waits, after the store is released, until the kernel lets go of
// the detached mount. A further signal (again: one came before the
// release) logs what is still open and makes drain return as soon as no
// file of the mount is open, even if the kernel still holds the mount (a
// process's working directory, say).
func drain(m mounted, mnt string, sig <-chan os.Signal, again bool) error {
	var tick <-chan time.Time
	for {
		if again && tick == nil {
			t := time.NewTicker(idlePoll)
			defer t.Stop()
			tick = t.C
		}
		select {
		case <-m.ended():
			slog.Info("unmounted", "mountpoint", mnt)
			return nil
		case s := <-sig:
			again = true
			logStillWaiting(m, mnt, s, nil)
		case <-tick:
		}
		if payload, other := m.openFiles(); tick != nil && payload+other == 0 {
			slog.Info("no file of the detached mount is open any more; exiting", "mountpoint", mnt)
			return nil
		}
	}
}

// isDeadMount reports whether err, from a stat of a mountpoint, says a
// killed daemon left its mount behind ("Transport endpoint is not
// connected").
func isDeadMount(err error) bool { return errors.Is(err, syscall.ENOTCONN) }

// checkMountpointDir refuses a mountpoint that is not a directory, or on
// which a file system (another templatefs, say) is mounted and alive: a
// new mount would stack on it and hide it. A dead mount left by a killed
// daemon passes, since serve detaches it, and so does the mountpoint of a
// stopping daemon, which has detached its mount before releasing the
// store. A mountpoint has another device than its parent.
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

// mountDev returns the device (major:minor) of the topmost mount at mnt
// in /proc/self/mountinfo, or "" when none is there or mountinfo cannot
// be read. It never touches the mount itself.
func mountDev(mnt string) string {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return ""
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	dev := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() { // proc(5): the device is the third field, the mount point the fifth
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 && mountinfo.Unescape(fields[4]) == abs {
			dev = fields[2] // later lines are mounted on top
		}
	}
	return dev
}
