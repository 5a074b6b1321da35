//go:build linux

package e2e

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"templatefs/tests/harness"
)

// notifySocket is a unixgram socket standing in for systemd's
// NOTIFY_SOCKET: it collects every notification line it receives.
type notifySocket struct {
	path  string
	lines chan string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "notify-") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &notifySocket{path: filepath.Join(dir, "notify"), lines: make(chan string, 256)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			k, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			for _, l := range strings.Split(string(buf[:k]), "\n") {
				select {
				case n.lines <- l:
				default: // a test that stopped listening
				}
			}
		}
	}()
	return n
}

// await waits (a generous bound) for the notification line want, and
// returns the lines received before it.
func (n *notifySocket) await(t *testing.T, want string) []string {
	t.Helper()
	var seen []string
	timeout := time.After(harness.StopTimeout)
	for {
		select {
		case l := <-n.lines:
			if l == want {
				return seen
			}
			seen = append(seen, l)
		case <-timeout:
			t.Fatalf("no %q on NOTIFY_SOCKET within %v; got %q", want, harness.StopTimeout, seen)
		}
	}
}

// startNotified starts `templatefs mount` as systemd would, with
// NOTIFY_SOCKET set, and returns the main process and the pid of the
// serving daemon it supervises.
func startNotified(t *testing.T, s *session, n *notifySocket) (*harness.Daemon, int) {
	t.Helper()
	cmd := harness.Command(t, "mount", s.store, s.mnt)
	cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+n.path)
	d := harness.StartDaemon(t, cmd, s.mnt)
	seen := n.await(t, "READY=1")
	m := regexp.MustCompile(`supervising the serving daemon"? pid=(\d+)`).FindStringSubmatch(d.Log())
	if m == nil {
		t.Fatalf("the main process did not log the serving daemon's pid (notifications %q):\n%s", seen, d.Log())
	}
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			harness.Unmount(t, s.mnt)
		}
	})
	return d, pid
}

// alive reports whether process pid exists and is not a zombie (the
// serving daemon is reparented when its main process exits, and this test
// cannot reap it).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// awaitExit waits (a generous bound) until process pid is gone.
func awaitExit(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(harness.StopTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running after %v", what, pid, harness.StopTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSystemdRestart runs the daemon as systemd's Type=notify service
// does, with a real unixgram NOTIFY_SOCKET: READY=1 once it serves; at
// SIGTERM STOPPING=1, and the main process exits as soon as the serving
// daemon has released the store, while a clone still reads memory.bin
// from it; a new daemon (the restart) mounts the same store on the same
// mountpoint and is READY; the clone's bytes cmp equal to the capture,
// and the old serving daemon exits once the clone is done.
func TestSystemdRestart(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t, "--memory", restartMemory)
	gen := s.publish(t)
	n := listenNotify(t)
	old, oldPid := startNotified(t, s, n)
	c := startClone(t, s.path("generations", gen, "payload", "memory.bin"))

	old.Signal(syscall.SIGTERM)
	if seen := n.await(t, "STOPPING=1"); !slices.Contains(seen, "STATUS=serving "+s.mnt) {
		t.Errorf("no STATUS line naming the mountpoint before STOPPING=1: %q", seen)
	}
	if r := old.Wait(harness.StopTimeout); r.Code != 0 {
		t.Fatalf("the main process ended with %v after SIGTERM, want exit 0", r)
	}
	n.await(t, "X_TEMPLATEFS_RELEASED=1") // relayed before the main process exits
	if !strings.Contains(old.Log(), releasedLine) {
		t.Errorf("the main process exited before the serving daemon released the store:\n%s", old.Log())
	}
	if !alive(oldPid) {
		t.Fatalf("the serving daemon %d exited while the clone holds memory.bin open:\n%s", oldPid, old.Log())
	}

	d, pid := startNotified(t, s, n)
	if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations"))); !slices.Equal(got, []string{gen}) {
		t.Errorf("ls generations on the new daemon: %q, want [%s]", got, gen)
	}
	c.finish(t)
	if r := harness.Tool(t, "cmp", filepath.Join(s.capture, "memory.bin"), c.out); r.Code != 0 {
		t.Errorf("the clone's bytes differ from the capture: %s%s", r.Stdout, r.Stderr)
	}
	awaitExit(t, oldPid, "the old serving daemon, its clone done")
	d.Stop()
	awaitExit(t, pid, "the new serving daemon, stopped with nothing open")
	if strings.Contains(old.Log(), "WARNING: DATA RACE") {
		t.Errorf("data race:\n%s", old.Log())
	}
}
