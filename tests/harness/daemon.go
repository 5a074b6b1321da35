//go:build linux

package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"templatefs/internal/mountinfo"
)

// FSType is the file system type a templatefs mount shows in
// /proc/self/mountinfo (package fs: "fuse." + fs.Name).
const FSType = "fuse.templatefs"

// MountTimeout bounds the wait for a daemon's mount to appear,
// StopTimeout the wait for a daemon to exit after SIGTERM, and
// KillTimeout the wait for a daemon to die after SIGKILL or
// SIGQUIT: longer means it is stuck in a request to its own mount.
const (
	MountTimeout = 10 * time.Second
	StopTimeout  = 30 * time.Second
	KillTimeout  = 10 * time.Second
)

// ReadyPrefix starts the line `templatefs mount` prints on stdout once it
// serves the mount: "mounted STORE at MNT".
const ReadyPrefix = "mounted "

// raceReport is what the race detector prints; a daemon log holding it
// fails the test.
const raceReport = "WARNING: DATA RACE"

// Daemon is a templatefs process serving a mount, started by StartMount or
// StartDaemon. Its stdout and stderr go to LogPath.
type Daemon struct {
	Mountpoint string // absolute
	LogPath    string

	tb    testing.TB
	cmd   *exec.Cmd
	done  chan struct{} // closed once the process has exited and been reaped
	state *os.ProcessState
}

// StartMount starts `templatefs mount [extraArgs...] store mnt` and
// returns once the mount is live (StartDaemon).
func StartMount(tb testing.TB, store, mnt string, extraArgs ...string) *Daemon {
	tb.Helper()
	args := append(append([]string{"mount"}, extraArgs...), store, mnt)
	return StartDaemon(tb, Command(tb, args...), mnt)
}

// StartDaemon starts cmd, a `templatefs mount` command line, with its
// stdout and stderr written to a log file, and waits (MountTimeout) until
// /proc/self/mountinfo lists mnt with type FSType and the daemon has
// printed its ready line (ReadyPrefix). Both are needed: the mount appears
// while go-fuse is still starting (its poll hack opens a file on the new
// mount, a request from the daemon to itself), and a signal the daemon
// gets in that window can leave it stuck in that request, unable to die
// even of SIGKILL. mnt must not be a live mountpoint already; a dead one
// (ENOTCONN, left by a killed daemon) is allowed, since the daemon
// detaches it, and the ready line tells the new mount from the dead one. It fails the test if the process exits
// first or the timeout passes, showing the log. A cleanup kills the
// process if it still runs, detaches the mount if it is still there, and
// shows the log if the test failed.
func StartDaemon(tb testing.TB, cmd *exec.Cmd, mnt string) *Daemon {
	tb.Helper()
	abs, err := filepath.Abs(mnt)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	if _, err := os.Stat(abs); IsMounted(tb, abs) && !errors.Is(err, syscall.ENOTCONN) {
		tb.Fatalf("harness: %s is already a mountpoint", abs)
	}
	logFile, err := os.CreateTemp(tb.TempDir(), "daemon-*.log")
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		tb.Fatalf("harness: start %s: %v", cmd, err)
	}
	d := &Daemon{Mountpoint: abs, LogPath: logFile.Name(), tb: tb, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		d.state = cmd.ProcessState
		close(d.done)
	}()
	tb.Cleanup(d.cleanup)
	deadline := time.Now().Add(MountTimeout)
	for MountType(tb, abs) != FSType || !d.ready() {
		select {
		case <-d.done:
			tb.Fatalf("harness: %s exited before mounting %s: %v\n%s", cmd, abs, d.state, d.Log())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("harness: %s did not mount %s within %v\n%s", cmd, abs, MountTimeout, d.Log())
		}
	}
	return d
}

// ready reports whether the daemon has printed its ready line.
func (d *Daemon) ready() bool {
	for _, line := range strings.Split(d.Log(), "\n") {
		if strings.HasPrefix(line, ReadyPrefix) {
			return true
		}
	}
	return false
}

// Log returns what the daemon has written so far.
func (d *Daemon) Log() string {
	data, err := os.ReadFile(d.LogPath)
	if err != nil {
		return fmt.Sprintf("(log %s: %v)", d.LogPath, err)
	}
	return string(data)
}

// Pid returns the daemon's process ID.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the daemon to exit (StopTimeout). The
// test fails unless it exits with status 0, leaves no mount behind and
// logged no data race.
func (d *Daemon) Stop() {
	d.tb.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.tb.Fatalf("harness: SIGTERM to daemon %d: %v", d.Pid(), err)
	}
	select {
	case <-d.done:
	case <-time.After(StopTimeout):
		d.tb.Errorf("harness: daemon %d still running %v after SIGTERM", d.Pid(), StopTimeout)
		d.kill(syscall.SIGQUIT) // the Go runtime dumps every goroutine's stack to the log
		d.Detach()
		d.tb.FailNow()
	}
	if code := d.state.ExitCode(); code != 0 {
		d.tb.Errorf("harness: daemon %d ended with %v after SIGTERM, want exit 0\n%s", d.Pid(), d.state, d.Log())
	}
	if IsMounted(d.tb, d.Mountpoint) {
		d.Detach()
		d.tb.Errorf("harness: daemon %d exited and left %s mounted", d.Pid(), d.Mountpoint)
	}
	d.checkRaces()
}

// Signal sends sig to the daemon and returns at once: a stopping daemon
// keeps serving the files open on its detached mount (WaitLog, Wait).
func (d *Daemon) Signal(sig syscall.Signal) {
	d.tb.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.tb.Fatalf("harness: %v to daemon %d: %v", sig, d.Pid(), err)
	}
}

// WaitLog waits up to timeout until the daemon's log holds want, and fails
// the test (showing the log) if it does not.
func (d *Daemon) WaitLog(want string, timeout time.Duration) {
	d.tb.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(d.Log(), want) {
		if time.Now().After(deadline) {
			d.tb.Fatalf("harness: daemon %d did not log %q within %v:\n%s", d.Pid(), want, timeout, d.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Running reports whether the daemon process has not exited yet.
func (d *Daemon) Running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL, waits for the daemon to die and detaches the dead
// mount it leaves.
func (d *Daemon) Kill() {
	d.tb.Helper()
	d.kill(syscall.SIGKILL)
	if !resultOf(d.state, "", "").Killed() {
		d.tb.Errorf("harness: daemon %d ended with %v before SIGKILL", d.Pid(), d.state)
	}
	d.Detach()
	d.checkRaces()
}

// kill sends sig (SIGKILL, or SIGQUIT for a stack dump) and waits up to
// KillTimeout for the daemon to die. A daemon that does not is stuck in a
// request to its own mount, which even SIGKILL cannot end: its FUSE
// connection is then aborted (abortConnection) and the test fails.
func (d *Daemon) kill(sig syscall.Signal) {
	d.tb.Helper()
	d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
		return
	case <-time.After(KillTimeout):
	}
	d.tb.Errorf("harness: daemon %d still alive %v after %v; aborting its FUSE connection", d.Pid(), KillTimeout, sig)
	if err := abortConnection(d.tb, d.Mountpoint); err != nil {
		d.tb.Errorf("harness: %v", err)
	}
	d.cmd.Process.Kill()
	select {
	case <-d.done:
	case <-time.After(KillTimeout):
		d.tb.Fatalf("harness: daemon %d survives SIGKILL and an aborted connection", d.Pid())
	}
}

// Wait waits up to timeout for the daemon to exit on its own (a fail
// point, an external unmount) and returns how it ended, with its log as
// Stderr. On timeout it kills the daemon and fails the test.
func (d *Daemon) Wait(timeout time.Duration) Result {
	d.tb.Helper()
	select {
	case <-d.done:
	case <-time.After(timeout):
		d.tb.Errorf("harness: daemon %d still running after %v", d.Pid(), timeout)
		d.kill(syscall.SIGQUIT) // the Go runtime dumps every goroutine's stack to the log
		d.Detach()
		d.tb.FailNow()
	}
	d.checkRaces()
	return resultOf(d.state, "", d.Log())
}

// Detach lazily unmounts the daemon's mountpoint if it is still mounted,
// as a killed daemon leaves it (Unmount).
func (d *Daemon) Detach() {
	d.tb.Helper()
	Unmount(d.tb, d.Mountpoint)
}

func (d *Daemon) checkRaces() {
	d.tb.Helper()
	if log := d.Log(); strings.Contains(log, raceReport) {
		d.tb.Errorf("harness: daemon %d reported a data race:\n%s", d.Pid(), log)
	}
}

func (d *Daemon) cleanup() {
	select {
	case <-d.done:
	default:
		d.kill(syscall.SIGKILL)
	}
	Unmount(d.tb, d.Mountpoint)
	if d.tb.Failed() {
		d.tb.Logf("daemon %d log (%s):\n%s", d.Pid(), d.LogPath, d.Log())
	}
}

// Unmount lazily detaches every mount at mnt, if any: umount2(MNT_DETACH)
// as root, `fusermount3 -u -z` otherwise. It fails the test if mnt is
// still a mountpoint afterwards.
func Unmount(tb testing.TB, mnt string) {
	tb.Helper()
	for range 8 {
		if !IsMounted(tb, mnt) {
			return
		}
		var err error
		if os.Geteuid() == 0 {
			err = unix.Unmount(mnt, unix.MNT_DETACH)
		} else if out, cerr := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput(); cerr != nil {
			err = fmt.Errorf("fusermount3 -u -z: %w: %s", cerr, out)
		}
		if err != nil {
			tb.Errorf("harness: detach %s: %v", mnt, err)
			return
		}
	}
	tb.Errorf("harness: %s is still mounted after 8 lazy unmounts", mnt)
}

// IsMounted reports whether mnt (made absolute) is a mountpoint in
// /proc/self/mountinfo. It never touches the mount itself, so it cannot
// hang on a dead or busy FUSE server. Failures to read mountinfo end the
// test.
func IsMounted(tb testing.TB, mnt string) bool {
	tb.Helper()
	return MountType(tb, mnt) != ""
}

// MountType returns the file system type of the topmost mount at mnt (made
// absolute), or "" when mnt is no mountpoint, from /proc/self/mountinfo.
// Failures to read mountinfo end the test.
func MountType(tb testing.TB, mnt string) string {
	tb.Helper()
	abs, err := filepath.Abs(mnt)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	mounts, err := Mounts()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	fstype := ""
	for _, m := range mounts { // later lines are mounted on top
		if m.Point == abs {
			fstype = m.FSType
		}
	}
	return fstype
}

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Dev    string // major:minor of the mounted device; a FUSE connection's number is the minor
	Point  string // mount point, unescaped
	FSType string // for example "fuse.templatefs"
}

// Mounts parses /proc/self/mountinfo (proc(5)): the device is the third
// field, the mount point the fifth, octal-escaped; the file system type
// follows the " - " separator.
func Mounts() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		fields, rest := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(rest) < 1 {
			return nil, fmt.Errorf("/proc/self/mountinfo: malformed line %q", line)
		}
		out = append(out, Mount{Dev: fields[2], Point: mountinfo.Unescape(fields[4]), FSType: rest[0]})
	}
	return out, sc.Err()
}

// fusectl is where the FUSE control file system is mounted (Linux
// Documentation/filesystems/fuse.rst, "Control filesystem").
const fusectl = "/sys/fs/fuse/connections"

// abortConnection aborts the FUSE connection of the topmost mount at mnt
// by writing to fusectl/<minor>/abort: every request waiting on the server
// fails, which frees a server process stuck in a request to its own mount.
// If fusectl is not mounted and this process is root, it is mounted for
// the write and unmounted after.
func abortConnection(tb testing.TB, mnt string) error {
	tb.Helper()
	mounts, err := Mounts()
	if err != nil {
		return err
	}
	dev := ""
	for _, m := range mounts {
		if m.Point == mnt {
			dev = m.Dev
		}
	}
	_, minor, ok := strings.Cut(dev, ":")
	if !ok {
		return fmt.Errorf("abort FUSE connection of %s: not mounted", mnt)
	}
	if MountType(tb, fusectl) == "" {
		if os.Geteuid() != 0 {
			return fmt.Errorf("abort FUSE connection of %s: %s is not mounted and we are not root", mnt, fusectl)
		}
		if err := unix.Mount("fusectl", fusectl, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("abort FUSE connection of %s: mount %s: %w", mnt, fusectl, err)
		}
		defer unix.Unmount(fusectl, 0)
	}
	return os.WriteFile(filepath.Join(fusectl, minor, "abort"), []byte("1"), 0)
}
