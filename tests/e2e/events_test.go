//go:build linux

package e2e

import (
	"os/exec"
	"syscall"
	"testing"

	"templatefs/tests/conformance"
	"templatefs/tests/harness"
)

// TestEventsDaemon: against a real daemon, with each backend the binary
// has, `cat MNT/events` shows changes made with touch and mv and a
// publication by the CLI (handed to the daemon); SIGINT
// ends a cat blocked in its read; and SIGTERM to the daemon while cats
// are blocked in theirs ends them at EOF with everything they were sent,
// and the daemon exits cleanly instead of waiting for them.
func TestEventsDaemon(t *testing.T) {
	harness.RequireFUSE(t)
	backends := []string{"go-fuse"}
	if harness.Cgofuse {
		backends = append(backends, "cgofuse")
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			s := newSession(t)
			gen := s.publish(t)
			d := harness.StartMount(t, s.store, s.mnt, "--backend", backend)
			readers := []*conformance.EventsReader{
				conformance.StartEventsReader(t, s.path("events")),
				conformance.StartEventsReader(t, s.path("events")),
				conformance.StartEventsReader(t, s.path("events")),
			}
			harness.MustTool(t, "touch", s.path("generations", gen, "leases", "e2e"))
			harness.MustTool(t, "mv", s.path("generations", gen), s.path("tombstones", gen))
			out := harness.Lines(harness.Run(t, "publish", "--duplicate", s.store, s.capture, "--class", s.class)) // through the daemon
			second := out[len(out)-1]
			for _, r := range readers {
				created, tombstoned, published := r.Next(), r.Next(), r.Next()
				if created.Kind != "lease-created" || created.Generation != gen || created.CloneID != "e2e" ||
					tombstoned.Kind != "tombstoned" || tombstoned.Generation != gen || tombstoned.Seq != created.Seq+1 ||
					published.Kind != "published" || published.Generation != second || published.Seq != created.Seq+2 {
					t.Errorf("lines %s, %s and %s, want lease-created and tombstoned of %s, published %s", created.Raw, tombstoned.Raw, published.Raw, gen, second)
				}
			}
			if err := readers[0].Cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if err := readers[0].Wait(); !killedBy(err, syscall.SIGINT) {
				t.Errorf("cat after SIGINT: %v, want killed by SIGINT", err)
			}
			d.Stop() // fails the test unless the daemon exits 0 within harness.StopTimeout
			for _, r := range readers[1:] {
				if err := r.Wait(); err != nil {
					t.Errorf("cat after the daemon's SIGTERM: %v, want exit 0 at EOF", err)
				}
			}
		})
	}
}

// killedBy reports whether err, from exec.Cmd.Wait, says sig ended the
// process.
func killedBy(err error, sig syscall.Signal) bool {
	exit, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
