//go:build linux

package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"

	"templatefs/internal/control"
	"templatefs/store"
	"templatefs/tests/harness"
)

// twinStores makes two stores, off and on, and one sample capture for
// both, under a new directory; it returns the directory.
func twinStores(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"off", "on"} {
		if err := os.MkdirAll(filepath.Join(dir, name, "mnt"), 0o755); err != nil {
			t.Fatal(err)
		}
		harness.Run(t, "init", filepath.Join(dir, name, "store"))
	}
	harness.Run(t, "sample-capture", "--memory", "8MiB", filepath.Join(dir, "cap"))
	return dir
}

// logLine matches the lines the store logs on stderr (slog): a command
// run offline logs them itself, one handed to the daemon leaves them in
// the daemon's log.
func withoutLog(stderr string) string {
	var keep []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(line, "time=") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "")
}

// TestOnlineSameAsOffline runs each store command on two equivalent
// stores, one not mounted and one mounted by a real daemon, and compares
// exit status, stdout and stderr (but the store's log lines, which the
// daemon logs itself), with the store's path written STORE: the command
// hands the operation to the daemon and behaves as it does offline.
func TestOnlineSameAsOffline(t *testing.T) {
	harness.RequireFUSE(t)
	dir := twinStores(t)
	capDir := filepath.Join(dir, "cap")
	d := harness.StartMount(t, filepath.Join(dir, "on", "store"), filepath.Join(dir, "on", "mnt"))
	damage := func(st string) {
		f, err := os.OpenFile(filepath.Join(st, "payload", "g000001", "state.bin"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte("damage"), 100); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		args   []string
		before func(st string) // on both stores, before the command
		code   int
	}{
		{args: []string{"publish", "STORE", capDir + "/capture", "--class", capDir + "/class.json"}},
		{args: []string{"publish", "STORE", capDir + "/capture", "--class", capDir + "/class.json"}},
		{args: []string{"publish", "--duplicate", "STORE", capDir + "/capture", "--class", capDir + "/class.json"}},
		{args: []string{"publish", "STORE", capDir + "/missing", "--class", capDir + "/class.json"}, code: 1},
		{args: []string{"publish", "STORE", capDir + "/capture", "--class", capDir + "/missing.json"}, code: 1},
		{args: []string{"fsck", "STORE"}},
		{args: []string{"fsck", "--digests", "STORE"}},
		{args: []string{"verify", "STORE"}},
		{args: []string{"settings", "STORE"}},
		{args: []string{"settings", "--restore-window", "2d", "--refuse-reboot", "STORE"}},
		{args: []string{"settings", "--restore-window", "40d", "STORE"}, code: 2},
		{args: []string{"verify", "STORE"}, before: damage, code: 1},
		{args: []string{"verify", "STORE", "g000001"}, code: 1},
		{args: []string{"verify", "STORE", "g000002"}},
		{args: []string{"verify", "STORE", "g000009"}, code: 1},
		{args: []string{"verify", "STORE", "9"}, code: 2},
		{args: []string{"fsck", "--digests", "STORE"}, code: 1},
		{args: []string{"fsck", "--repair", "STORE"}, before: func(st string) {
			if err := os.Mkdir(filepath.Join(st, "staging", "g000099"), 0o700); err != nil {
				t.Fatal(err)
			}
		}}, // the damage is found by digests only
		{args: []string{"fsck", "STORE"}},
	}
	for _, step := range steps {
		var results [2]harness.Result
		for i, name := range []string{"off", "on"} {
			st := filepath.Join(dir, name, "store")
			if step.before != nil {
				step.before(st)
			}
			args := make([]string, len(step.args))
			for j, a := range step.args {
				args[j] = strings.ReplaceAll(a, "STORE", st)
			}
			r := harness.RunStatus(t, args...)
			r.Stdout = strings.ReplaceAll(r.Stdout, st, "STORE")
			r.Stderr = strings.ReplaceAll(withoutLog(r.Stderr), st, "STORE")
			results[i] = r
		}
		off, on := results[0], results[1]
		if off.Code != step.code || on.Code != step.code || off.Stdout != on.Stdout || off.Stderr != on.Stderr {
			t.Errorf("templatefs %q:\noffline: exit %d\nstdout:\n%s\nstderr:\n%s\nonline: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d both ways and the same output",
				step.args, off.Code, off.Stdout, off.Stderr, on.Code, on.Stdout, on.Stderr, step.code)
		}
	}
	if log := d.Log(); !strings.Contains(log, "control: running operation") {
		t.Errorf("the daemon ran no operation:\n%s", log)
	}
	d.Stop()
	if _, err := os.Lstat(control.SocketPath(filepath.Join(dir, "on", "store"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the control socket is still there after the daemon stopped: %v", err)
	}
}

// TestOnlineRepair: fsck --repair through the daemon repairs what can be
// repaired online (staging leftovers, a stray payload file), and the next
// fsck is clean. Once the daemon's store is read-only (a failed fsync),
// it repairs nothing and says, per problem, that it needs the store
// unmounted; after the daemon stops, fsck --repair repairs it.
// (Publications in progress are spared: TestCheckSparesPublicationInProgress
// in package store, on the Store the daemon uses.)
func TestOnlineRepair(t *testing.T) {
	harness.RequireFUSE(t)
	dir := twinStores(t)
	st, capDir := filepath.Join(dir, "on", "store"), filepath.Join(dir, "cap")
	mnt := filepath.Join(dir, "on", "mnt")
	harness.Run(t, "publish", st, capDir+"/capture", "--class", capDir+"/class.json")
	d := harness.StartMount(t, st, mnt)
	for _, p := range []string{filepath.Join(st, "staging", "g000007"), filepath.Join(st, "staging", "junk")} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(st, "payload", "g000001", "stray"), []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	r := harness.RunStatus(t, "fsck", "--repair", st)
	want := []string{
		"artifact-unexpected generation g000001: stray is not one of its artifacts (repaired)",
		"staging-leftover staging/g000007: no publication in progress owns it (repaired)",
		"staging-leftover staging/junk: no publication in progress owns it (repaired)",
	}
	if r.Code != 0 || strings.Join(harness.Lines(r.Stdout), "\n") != strings.Join(want, "\n") {
		t.Errorf("fsck --repair while mounted: %v\nstdout:\n%s\nwant exit 0 and:\n%s", r, r.Stdout, strings.Join(want, "\n"))
	}
	if r := harness.RunStatus(t, "fsck", st); r.Code != 0 || r.Stdout != "" {
		t.Errorf("fsck after the online repair: %v\nstdout:\n%s\nwant clean", r, r.Stdout)
	}
	d.Stop()

	mount := harness.Command(t, "mount", st, mnt)
	mount.Env = append(mount.Env, store.FailpointEnv+"=payload-fsync:EIO")
	d = harness.StartDaemon(t, mount, mnt)
	if r := harness.RunStatus(t, "publish", "--duplicate", st, capDir+"/capture", "--class", capDir+"/class.json"); r.Code != 1 {
		t.Fatalf("publish with payload fsyncs failing: %v; want exit 1", r)
	}
	if err := os.Mkdir(filepath.Join(st, "staging", "junk"), 0o700); err != nil {
		t.Fatal(err)
	}
	r = harness.RunStatus(t, "fsck", "--repair", st)
	want = []string{
		"staging-leftover staging/junk: no publication in progress owns it",
		"  staging-leftover staging/junk needs the store unmounted: stop the daemon, then run fsck --repair",
	}
	if r.Code != 1 || strings.Join(harness.Lines(r.Stdout), "\n") != strings.Join(want, "\n") || !strings.Contains(r.Stderr, "read-only") {
		t.Errorf("fsck --repair on a read-only daemon: %v\nstdout:\n%s\nwant exit 1, the read-only reason on stderr and:\n%s", r, r.Stdout, strings.Join(want, "\n"))
	}
	d.Stop()
	if r := harness.RunStatus(t, "fsck", "--repair", st); r.Code != 0 {
		t.Errorf("fsck --repair after the daemon stopped: %v", r)
	}
}

// TestNoDaemon: a store held by a process that serves no control socket
// (a command, or a daemon not ready yet, or one that left a stale
// socket) makes a command fail with exit 1, saying who holds the store
// and that no daemon serves it; after a daemon is killed, its stale
// socket neither bothers an offline command nor a new daemon.
func TestNoDaemon(t *testing.T) {
	harness.RequireFUSE(t)
	dir := twinStores(t)
	st, mnt := filepath.Join(dir, "on", "store"), filepath.Join(dir, "on", "mnt")
	s, err := store.Open(st, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []bool{false, true} {
		if stale {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: control.SocketPath(st), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
		}
		r := harness.RunStatus(t, "settings", st)
		if r.Code != 1 || !strings.Contains(r.Stderr, "store is in use by pid") || !strings.Contains(r.Stderr, "no daemon serves it") || r.Stdout != "" {
			t.Errorf("settings on a store held by a command (stale socket %t): %v; want exit 1 naming the holder and no daemon", stale, r)
		}
	}
	s.Close()
	if r := harness.RunStatus(t, "fsck", st); r.Code != 0 {
		t.Errorf("fsck with a stale control socket in the store: %v; want it tolerated", r)
	}
	d := harness.StartMount(t, st, mnt)
	d.Kill()
	if _, err := os.Lstat(control.SocketPath(st)); err != nil {
		t.Fatalf("a killed daemon left no socket (%v): the test means to see one", err)
	}
	if r := harness.RunStatus(t, "verify", st); r.Code != 0 {
		t.Errorf("verify after the daemon was killed: %v", r)
	}
	harness.StartMount(t, st, mnt)
	if r := harness.RunStatus(t, "verify", st); r.Code != 0 {
		t.Errorf("verify through a daemon that replaced a stale socket: %v", r)
	}
}

// runOnTerminal runs templatefs with args with its stderr on a new
// pseudo-terminal and returns what the terminal showed and the exit
// status.
func runOnTerminal(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	cmd := harness.Command(t, args...)
	cmd.Stderr = tty
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var shown bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&shown, ptmx); close(done) }() // ends with EIO once the command has exited
	err = cmd.Wait()
	<-done
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return shown.String(), cmd.ProcessState.ExitCode()
}

// TestProgress: on a terminal, publish shows the bytes copied and verify
// and fsck --digests the bytes hashed, with the rate, offline and through
// the daemon; when stderr is not a terminal they show nothing.
func TestProgress(t *testing.T) {
	harness.RequireFUSE(t)
	dir := twinStores(t)
	capDir := filepath.Join(dir, "cap")
	harness.StartMount(t, filepath.Join(dir, "on", "store"), filepath.Join(dir, "on", "mnt"))
	for _, name := range []string{"off", "on"} {
		st := filepath.Join(dir, name, "store")
		for _, c := range []struct {
			args  []string
			label string
		}{
			{[]string{"publish", st, capDir + "/capture", "--class", capDir + "/class.json"}, "copy"},
			{[]string{"verify", st}, "hash"},
			{[]string{"fsck", "--digests", st}, "hash"},
		} {
			shown, code := runOnTerminal(t, c.args...)
			shown = withoutLog(strings.ReplaceAll(shown, "\r\n", "\n"))
			if code != 0 || !strings.Contains(shown, c.label) || !strings.Contains(shown, "100%") || !strings.Contains(shown, " MB, ") || !strings.Contains(shown, "B/s") {
				t.Errorf("%s (%s): exit %d; the terminal showed %q; want a %s bar at 100%% with bytes and rate", c.args[0], name, code, shown, c.label)
			}
		}
		for _, args := range [][]string{{"publish", "--duplicate", st, capDir + "/capture", "--class", capDir + "/class.json"}, {"verify", st}} {
			r := harness.RunStatus(t, args...)
			if rest := withoutLog(r.Stderr); r.Code != 0 || rest != "" {
				t.Errorf("%s (%s) with stderr not a terminal: %v; want nothing but log lines on stderr", args[0], name, r)
			}
		}
	}
}

// TestDaemonDiesDuringOperation: a daemon killed in the middle of a
// publication it runs for a command (a kill point) makes the command fail
// saying the daemon closed the connection; the store recovers as from any
// crash: fsck --repair removes the leftover, and a new daemon publishes.
func TestDaemonDiesDuringOperation(t *testing.T) {
	harness.RequireFUSE(t)
	dir := twinStores(t)
	st, mnt, capDir := filepath.Join(dir, "on", "store"), filepath.Join(dir, "on", "mnt"), filepath.Join(dir, "cap")
	mount := harness.Command(t, "mount", st, mnt)
	mount.Env = append(mount.Env, store.FailpointEnv+"=publish-copied-memory.bin")
	d := harness.StartDaemon(t, mount, mnt)
	publish := []string{"publish", st, capDir + "/capture", "--class", capDir + "/class.json"}
	r := harness.RunStatus(t, publish...)
	if r.Code != 1 || r.Stdout != "" || !strings.Contains(r.Stderr, "the daemon closed the connection before the operation finished") {
		t.Errorf("publish through a daemon killed mid-copy: %v; want exit 1 saying the daemon went away", r)
	}
	if r := d.Wait(harness.KillTimeout); !r.Killed() {
		t.Fatalf("daemon at the kill point: %v", r)
	}
	harness.Unmount(t, mnt)
	if r := harness.RunStatus(t, "fsck", "--repair", st); r.Code != 0 || !strings.Contains(r.Stdout, "staging-leftover staging/g000001: no publication in progress owns it (repaired)") {
		t.Errorf("fsck --repair after the daemon died: %v\nstdout:\n%s", r, r.Stdout)
	}
	harness.StartMount(t, st, mnt)
	if out := harness.Lines(harness.Run(t, publish...)); len(out) == 0 || out[len(out)-1] != "g000002" {
		t.Errorf("publish through a new daemon printed %q; want g000002 (g000001 was burnt)", out)
	}
}

// TestDaemonRefusesOtherStore: a request naming another STORE than the
// daemon's own is refused, and neither store changes; a FIFO given as the
// class is refused before anything reads it, offline and online alike
// (a daemon reading it would block its own stop).
func TestDaemonRefusesOtherStore(t *testing.T) {
	harness.RequireFUSE(t)
	dir := twinStores(t)
	on, off := filepath.Join(dir, "on", "store"), filepath.Join(dir, "off", "store")
	before := harness.Run(t, "settings", off)
	d := harness.StartMount(t, on, filepath.Join(dir, "on", "mnt"))
	var stdout, stderr bytes.Buffer
	code, err := control.Call(on, control.Request{Command: "settings", Args: []string{"--restore-window=1h", "--", off}}, &stdout, &stderr, nil)
	if err != nil || code != 1 || !strings.Contains(stderr.String(), "this daemon serves the store") {
		t.Errorf("settings of %s through the daemon of %s: exit %d, %v, stderr %q; want exit 1, refused", off, on, code, err, stderr.String())
	}
	d.Stop()
	if after := harness.Run(t, "settings", off); after != before {
		t.Errorf("settings of %s changed by a refused request:\n%s\nwant\n%s", off, after, before)
	}
	fifo := filepath.Join(dir, "class.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join(dir, "cap", "capture")
	for _, mounted := range []bool{false, true} {
		if mounted {
			d = harness.StartMount(t, on, filepath.Join(dir, "on", "mnt"))
		}
		r := harness.RunStatus(t, "publish", "--class", fifo, on, capture)
		if r.Code != 1 || !strings.Contains(r.Stderr, fifo+" is a named pipe, not a regular file") {
			t.Errorf("publish --class FIFO (mounted %t): %v; want exit 1, \"FIFO is a named pipe, not a regular file\"", mounted, r)
		}
	}
	d.Stop()
}
