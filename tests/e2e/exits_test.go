//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"templatefs/tests/harness"
)

// exitBound bounds every wait for the daemon to record an exit: generous,
// it only catches hangs (2 noisy cores, -race).
const exitBound = 20 * time.Second

// leaseRecord is what the exit tests read of a lease file.
type leaseRecord struct {
	State    string    `json:"state"`
	ExitedAt time.Time `json:"exited_at"`
	Exit     string    `json:"exit"`
	Process  *struct {
		PID int `json:"pid"`
	} `json:"process"`
}

// readLease cats the lease file at path and decodes it.
func readLease(t *testing.T, path string) leaseRecord {
	t.Helper()
	var l leaseRecord
	out := harness.MustTool(t, "cat", path)
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("cat %s = %q: %v", path, out, err)
	}
	return l
}

// waitExited polls the lease file at path with cat until it shows state
// exited (exitBound) and returns it.
func waitExited(t *testing.T, path string) leaseRecord {
	t.Helper()
	deadline := time.Now().Add(exitBound)
	for {
		l := readLease(t, path)
		if l.State == "exited" {
			if l.ExitedAt.IsZero() || l.Exit == "" {
				t.Errorf("exited lease %s has no exit time or verdict: %+v", path, l)
			}
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %s %v after its process was killed", path, l.State, exitBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bind writes `pid N` to the lease file at path, as `echo pid N > path`.
func bind(t *testing.T, path string, pid int) {
	t.Helper()
	harness.MustTool(t, "sh", "-c", `echo "pid $1" > "$2"`, "sh", strconv.Itoa(pid), path)
}

// TestExitTracking: a lease bound to a real process through the mount
// becomes exited when the process is killed, with no rm; cat shows it
// and the time; rm settles it. A retiring generation is deleted once its
// leases have all exited, and its exited leases stay until rm.
func TestExitTracking(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t)
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt)
	defer func() { d.Stop() }()

	harness.MustTool(t, "touch", s.path("generations", gen, "leases", "c1"))
	p := harness.Sleeper(t)
	bind(t, s.path("leases", "c1"), p.Process.Pid)
	if l := readLease(t, s.path("leases", "c1")); l.State != "bound" {
		t.Fatalf("after pid %d: %+v, want bound", p.Process.Pid, l)
	}
	p.Process.Kill()
	p.Wait()
	if l := waitExited(t, s.path("generations", gen, "leases", "c1")); l.Process == nil || l.Process.PID != p.Process.Pid || l.Exit != "exited" {
		t.Errorf("exited lease: %+v, want pid %d, exit exited", l, p.Process.Pid)
	}
	if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations", gen, "leases"))); len(got) != 1 || got[0] != "c1" {
		t.Errorf("ls leases = %q, want the exited c1 listed", got)
	}
	harness.MustTool(t, "rm", s.path("leases", "c1"))
	if _, err := os.Lstat(s.path("leases", "c1")); !os.IsNotExist(err) {
		t.Errorf("leases/c1 after rm: %v, want gone", err)
	}

	// Retirement drains on exits.
	var procs []*exec.Cmd
	for _, c := range []string{"r1", "r2"} {
		harness.MustTool(t, "touch", s.path("generations", gen, "leases", c))
		p := harness.Sleeper(t)
		bind(t, s.path("leases", c), p.Process.Pid)
		procs = append(procs, p)
	}
	harness.MustTool(t, "mv", s.path("generations", gen), s.path("tombstones")+"/")
	harness.MustTool(t, "rmdir", s.path("tombstones", gen))
	if _, err := os.Stat(s.path("retiring", gen)); err != nil {
		t.Fatalf("retiring/%s with two bound leases: %v", gen, err)
	}
	for _, p := range procs {
		p.Process.Kill()
	}
	for _, c := range []string{"r1", "r2"} {
		waitExited(t, s.path("leases", c))
	}
	deadline := time.Now().Add(exitBound)
	for _, err := os.Stat(s.path("retiring", gen)); err == nil; _, err = os.Stat(s.path("retiring", gen)) {
		if time.Now().After(deadline) {
			t.Fatalf("retiring/%s still there %v after its leases exited", gen, exitBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []string{"r1", "r2"} {
		if l := readLease(t, s.path("leases", c)); l.State != "exited" {
			t.Errorf("lease %s of the retired generation: %+v, want exited", c, l)
		}
	}
	d.Stop()
	s.fsckClean(t)
	d = harness.StartMount(t, s.store, s.mnt)
	for _, c := range []string{"r1", "r2"} {
		harness.MustTool(t, "rm", s.path("leases", c))
	}
	if got := harness.Lines(harness.MustTool(t, "ls", s.path("leases"))); len(got) != 0 {
		t.Errorf("ls leases after rm = %q, want empty", got)
	}
}

// TestExitWhileStopped: a process that exits while no daemon runs makes
// its lease exited when the next daemon starts.
func TestExitWhileStopped(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t)
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt)
	harness.MustTool(t, "touch", s.path("generations", gen, "leases", "c1"))
	p := harness.Sleeper(t)
	bind(t, s.path("leases", "c1"), p.Process.Pid)
	d.Stop()
	p.Process.Kill()
	p.Wait()

	d = harness.StartMount(t, s.store, s.mnt)
	defer d.Stop()
	if l := readLease(t, s.path("leases", "c1")); l.State != "exited" || l.Exit != "exited" || l.ExitedAt.IsZero() {
		t.Errorf("lease after the restart: %+v, want exited at start", l)
	}
	harness.MustTool(t, "rm", s.path("leases", "c1"))
}
