//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"templatefs/tests/harness"
)

// TestTakeoverAtOnce: `kill -TERM OLD; templatefs mount STORE MNT` with no
// wait in between mounts, while a clone still holds a payload of the old
// daemon open: the new mount waits for the stopping daemon to release the
// store instead of refusing it.
func TestTakeoverAtOnce(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t)
	gen := s.publish(t)
	old := harness.StartMount(t, s.store, s.mnt)
	held, err := os.Open(s.path("generations", gen, "payload", "memory.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	old.Signal(syscall.SIGTERM)
	// At once, as a script would: the old mount may still be there, so
	// this is not harness.StartMount, which refuses a live mountpoint.
	fresh := harness.Command(t, "mount", s.store, s.mnt)
	var log harness.SyncBuffer
	fresh.Stdout, fresh.Stderr = &log, &log
	if err := fresh.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = fresh.Wait(); close(exited) }()
	defer func() {
		fresh.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	for deadline := time.Now().Add(restartTimeout); !strings.Contains(log.String(), harness.ReadyPrefix); {
		select {
		case <-exited:
			t.Fatalf("the new mount exited (%v) instead of taking over:\n%s", waitErr, log.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new mount did not take over within %v:\n%s", restartTimeout, log.String())
		}
	}
	if got := harness.MustTool(t, "ls", s.path("generations")); strings.TrimSpace(got) != gen {
		t.Errorf("ls generations on the new daemon = %q, want %s", got, gen)
	}
	if !old.Running() {
		t.Errorf("the old daemon exited while a payload is open:\n%s", old.Log())
	}
	held.Close()
	old.Wait(releaseTimeout)
}

// TestMountRefusesLiveDaemon: a second mount of a store that a live
// daemon serves is refused at once, naming the daemon, not after the
// takeover wait.
func TestMountRefusesLiveDaemon(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t)
	d := harness.StartMount(t, s.store, s.mnt)
	other := t.TempDir()
	r := harness.RunStatus(t, "mount", s.store, other)
	if r.Code != 1 || !strings.Contains(r.Stderr, "in use") {
		t.Errorf("mount of a store a daemon serves: %v; want exit 1, in use", r)
	}
	d.Stop()
}

// TestStopInterruptsOperation: SIGTERM while the daemon runs a long
// operation for a client (the hashing of a 4 GiB memory.bin) ends that
// operation at its next block: the client fails saying why, nothing is
// published, staging/ is empty, and the store is released for the next
// daemon without waiting for the hash to finish.
func TestStopInterruptsOperation(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t, "--memory", "4GiB")
	d := harness.StartMount(t, s.store, s.mnt)
	pub := harness.Command(t, "publish", s.store, s.capture, "--class", s.class)
	var stderr harness.SyncBuffer
	pub.Stderr = &stderr
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	d.WaitLog("control: running operation", 30*time.Second)
	d.Signal(syscall.SIGTERM)
	err := pub.Wait()
	if code := pub.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("publish through a daemon that got SIGTERM: exit %d (%v), stderr %q; want 1 and the interruption", code, err, stderr.String())
	}
	d.Wait(releaseTimeout)
	if left, err := os.ReadDir(filepath.Join(s.store, "staging")); err != nil || len(left) != 0 {
		t.Errorf("staging/ after the interrupted publication: %v, %v; want empty", left, err)
	}
	fresh := harness.StartMount(t, s.store, s.mnt)
	if got := harness.MustTool(t, "ls", s.path("generations")); strings.TrimSpace(got) != "" {
		t.Errorf("ls generations after the interrupted publication = %q, want nothing", got)
	}
	fresh.Stop()
}
