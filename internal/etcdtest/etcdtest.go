// Package etcdtest runs a real etcd server (Debian's etcd-server,
// /usr/bin/etcd) on loopback ports with its data in a test's temporary
// directory, for the fleet tests and benchmarks.
package etcdtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is the etcd server the tests run.
const Binary = "/usr/bin/etcd"

// StartTimeout bounds the wait for a started server to report healthy.
const StartTimeout = 30 * time.Second

// Server is one etcd member serving a single-member cluster. Stop and
// Start may alternate; its data directory and ports stay the same, so a
// restarted server has the revisions and compactions of the one before.
type Server struct {
	ClientURL string // http://127.0.0.1:<port>
	dataDir   string
	peerURL   string
	logPath   string

	tb   testing.TB
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a server on two free loopback ports with its data directory
// in tb.TempDir(), waits until it is healthy and stops it in tb.Cleanup.
// Without Binary the test fails, naming the Debian package.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := os.Stat(Binary); err != nil {
		tb.Fatalf("etcdtest: %v: install Debian's etcd-server", err)
	}
	dir := tb.TempDir()
	s := &Server{
		ClientURL: "http://" + freeAddr(tb),
		peerURL:   "http://" + freeAddr(tb),
		dataDir:   filepath.Join(dir, "data"),
		logPath:   filepath.Join(dir, "etcd.log"),
		tb:        tb,
	}
	tb.Cleanup(s.Stop)
	s.Restart()
	return s
}

// freeAddr returns a loopback address with a port no one listens on now.
func freeAddr(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Restart starts the server (again) and waits until /health says it is
// healthy; it fails the test if it is not within StartTimeout.
func (s *Server) Restart() {
	s.tb.Helper()
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.tb.Fatalf("etcdtest: %v", err)
	}
	defer log.Close()
	cmd := exec.Command(Binary,
		"--name", "default",
		"--data-dir", s.dataDir,
		"--listen-client-urls", s.ClientURL, "--advertise-client-urls", s.ClientURL,
		"--listen-peer-urls", s.peerURL, "--initial-advertise-peer-urls", s.peerURL,
		"--initial-cluster", "default="+s.peerURL,
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("etcdtest: start %s: %v", Binary, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(StartTimeout)
	for !s.healthy() {
		select {
		case <-done:
			s.tb.Fatalf("etcdtest: etcd exited while starting:\n%s", s.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("etcdtest: etcd not healthy within %v:\n%s", StartTimeout, s.Log())
		}
	}
}

// healthy reports whether the server's /health endpoint says so.
func (s *Server) healthy() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(s.ClientURL + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for
// it to exit; a stopped server's Stop does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Log returns the server's output so far.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}
