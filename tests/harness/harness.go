//go:build linux

// Package harness runs the real templatefs command for end-to-end tests:
// it builds ./cmd/templatefs once per test binary, runs CLI commands, and
// starts, stops and kills `templatefs mount` daemons as child processes,
// never leaving a mount behind.
//
// Daemons always run in a child process, never in the test process: tests
// exec tools against the mount and kill the server, and a process that
// serves a FUSE mount and also touches it can deadlock (go-fuse fs/api.go,
// "Deadlocks").
//
// A test package calls Main from its TestMain, so the built binary is
// removed at the end:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"templatefs/internal/hostclock"
)

// RequireFUSEEnv names the environment variable that turns a missing FUSE
// (RequireFUSE) from a skip into a failure when it is "1"; CI sets it.
const RequireFUSEEnv = "TEMPLATEFS_REQUIRE_FUSE"

// CommandTimeout bounds one CLI command or tool run by Exec; a command
// still running then is killed and the test fails.
const CommandTimeout = 2 * time.Minute

var build struct {
	once sync.Once
	dir  string // holds the binary; removed by Main
	bin  string
	err  error
}

// Main runs the tests of m and then removes the binary Binary built.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// ModuleRoot returns the directory of the templatefs module (where go.mod
// is), from `go env GOMOD`. Failures end the test.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("harness: go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		tb.Fatalf("harness: not inside a Go module (go env GOMOD = %q)", gomod)
	}
	return filepath.Dir(gomod)
}

// Binary returns the path of the templatefs binary, building
// ./cmd/templatefs with `go build` the first time it is called in this
// process (with -race when the tests are built with -race, and with the
// clockskew tag when they are, so the binary reads the same moved clock as
// the test: internal/hostclock; with the fuse3 tag when they are, so it
// can serve with cgofuse: Cgofuse). Failures end the test.
func Binary(tb testing.TB) string {
	tb.Helper()
	build.once.Do(func() {
		root := ModuleRoot(tb)
		build.dir, build.err = os.MkdirTemp("", "templatefs-harness-")
		if build.err != nil {
			return
		}
		build.bin = filepath.Join(build.dir, "templatefs")
		args := []string{"build", "-o", build.bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		var tags []string
		if hostclock.Tagged {
			tags = append(tags, "clockskew")
		}
		if Cgofuse {
			tags = append(tags, "fuse3")
		}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.Command("go", append(args, "./cmd/templatefs")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/templatefs in %s: %w\n%s", root, err, out)
		}
	})
	if build.err != nil {
		tb.Fatalf("harness: %v", build.err)
	}
	return build.bin
}

// Command returns an unstarted templatefs command with args, inheriting
// the test's environment; callers may add to Env (for example a fail
// point, store.FailpointEnv) before passing it to Exec or StartDaemon.
// A race-enabled binary is told not to sleep at exit (the race detector's
// atexit_sleep_ms defaults to one second), unless GORACE says otherwise.
func Command(tb testing.TB, args ...string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(Binary(tb), args...)
	cmd.Env = os.Environ()
	if raceEnabled {
		cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace("atexit_sleep_ms=0 "+os.Getenv("GORACE")))
	}
	return cmd
}

// Result is how a finished process ended.
type Result struct {
	Stdout, Stderr string
	// Code is the exit status, or -1 when a signal ended the process.
	Code int
	// Signal is the signal that ended the process, or 0.
	Signal syscall.Signal
}

// Killed reports whether SIGKILL ended the process.
func (r Result) Killed() bool { return r.Signal == syscall.SIGKILL }

// String describes the ending and the stderr, for test messages.
func (r Result) String() string {
	how := fmt.Sprintf("exit %d", r.Code)
	if r.Signal != 0 {
		how = "killed by " + r.Signal.String()
	}
	return fmt.Sprintf("%s; stderr:\n%s", how, r.Stderr)
}

// Exec runs cmd (any program, not only templatefs) to completion,
// capturing stdout and stderr unless the caller set them, and returns how
// it ended. It fails the test only if cmd cannot be started or runs longer
// than CommandTimeout.
func Exec(tb testing.TB, cmd *exec.Cmd) Result {
	tb.Helper()
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("harness: start %s: %v", cmd, err)
	}
	timer := time.AfterFunc(CommandTimeout, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		tb.Fatalf("harness: %s still running after %v; killed it", cmd, CommandTimeout)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		tb.Fatalf("harness: %s: %v", cmd, err)
	}
	return resultOf(cmd.ProcessState, stdout.String(), stderr.String())
}

func resultOf(ps *os.ProcessState, stdout, stderr string) Result {
	r := Result{Stdout: stdout, Stderr: stderr, Code: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal()
	}
	return r
}

// RunStatus runs templatefs with args and returns how it ended, whatever
// that was.
func RunStatus(tb testing.TB, args ...string) Result {
	tb.Helper()
	return Exec(tb, Command(tb, args...))
}

// Run runs templatefs with args and returns its stdout; anything but exit
// status 0 fails the test with the stderr.
func Run(tb testing.TB, args ...string) string {
	tb.Helper()
	r := RunStatus(tb, args...)
	if r.Code != 0 {
		tb.Fatalf("templatefs %s: %v", strings.Join(args, " "), r)
	}
	return r.Stdout
}

// RequireFUSE skips the test when FUSE cannot be mounted here: no
// /dev/fuse, or neither root nor fusermount3. With RequireFUSEEnv=1 it
// fails the test instead, naming the reason.
func RequireFUSE(tb testing.TB) {
	tb.Helper()
	reason := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		reason = fmt.Sprintf("FUSE unavailable: %v", err)
	} else if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			reason = fmt.Sprintf("not root and no fusermount3 (Debian package fuse3): %v", err)
		}
	}
	if reason != "" {
		SkipOrFail(tb, "%s", reason)
	}
}

// SkipOrFail skips the test for a missing prerequisite (FUSE, a tool), or
// fails it when RequireFUSEEnv=1, as in CI, where nothing may be missing.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv(RequireFUSEEnv) == "1" {
		tb.Fatalf(format+" ("+RequireFUSEEnv+"=1)", args...)
	}
	tb.Skipf(format, args...)
}

// Tool runs an ordinary program (ls, cmp, tar...) and returns how it ended.
func Tool(tb testing.TB, name string, args ...string) Result {
	tb.Helper()
	return Exec(tb, exec.Command(name, args...))
}

// MustTool runs an ordinary program and returns its stdout; anything but
// exit status 0 fails the test.
func MustTool(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	r := Tool(tb, name, args...)
	if r.Code != 0 {
		tb.Fatalf("%s %s: %v", name, strings.Join(args, " "), r)
	}
	return r.Stdout
}

// Lines splits command output into its lines, without the final newline.
func Lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// SyncBuffer collects log output written from several goroutines (an
// in-process mount's server); the zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Sleeper starts `sleep 600`, a real process that leases can be bound to;
// a cleanup kills and reaps it.
func Sleeper(tb testing.TB) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}
