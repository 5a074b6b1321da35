//go:build linux

package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"templatefs/store"
)

// echo is a handler that writes its arguments to stdout and stderr,
// reports progress and exits with the number of arguments; command
// "refuse" is refused.
func echo(req Request, w *Writer) (int, error) {
	if req.Command == "refuse" {
		return 0, errors.New("no such command")
	}
	for _, a := range req.Args {
		w.Stdout().Write([]byte(a + "\n"))
		w.Stderr().Write([]byte("err " + a + "\n"))
	}
	w.Progress("hash", 10, 10)
	return len(req.Args), nil
}

// listen serves a new directory with handle, owned by owner.
func listen(t *testing.T, owner int, handle Handler) (string, *Server) {
	t.Helper()
	dir := t.TempDir()
	srv, err := Listen(dir, owner, handle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return dir, srv
}

// TestCall runs a request over a real socket: output and progress come
// back in order, then the exit status; the socket is owner-only.
func TestCall(t *testing.T) {
	dir, _ := listen(t, os.Geteuid(), echo)
	fi, err := os.Lstat(SocketPath(dir))
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, %v; want a socket of mode 0600", SocketPath(dir), fi, err)
	}
	var stdout, stderr bytes.Buffer
	var progress []Progress
	code, err := Call(dir, Request{Command: "x", Args: []string{"a", "b"}, Progress: true}, &stdout, &stderr, func(p Progress) { progress = append(progress, p) })
	if err != nil || code != 2 {
		t.Fatalf("Call: %d, %v; want exit 2", code, err)
	}
	if stdout.String() != "a\nb\n" || stderr.String() != "err a\nerr b\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if len(progress) != 1 || progress[0] != (Progress{Label: "hash", Done: 10, Total: 10}) {
		t.Errorf("progress %v; want one hash 10/10", progress)
	}
	progress = nil
	if code, err := Call(dir, Request{Command: "x"}, &stdout, &stderr, func(p Progress) { progress = append(progress, p) }); err != nil || code != 0 || len(progress) != 0 {
		t.Errorf("Call without progress: %d, %v, progress %v; want exit 0 and no progress", code, err, progress)
	}
	if _, err := Call(dir, Request{Command: "refuse"}, &stdout, &stderr, nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no such command") {
		t.Errorf("Call of a refused command: %v; want ErrRefused with the reason", err)
	}
}

// rawRequest sends line on dir's socket and returns the replies.
func rawRequest(t *testing.T, dir, line string) []Reply {
	t.Helper()
	conn, err := net.Dial("unix", SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(line + "\n"))
	var replies []Reply
	dec := json.NewDecoder(conn)
	for {
		var r Reply
		if err := dec.Decode(&r); err != nil {
			return replies
		}
		replies = append(replies, r)
	}
}

// TestBadRequests: another protocol version and a line that is no JSON
// get one Error reply that says what is wrong, and nothing runs.
func TestBadRequests(t *testing.T) {
	ran := false
	dir, _ := listen(t, os.Geteuid(), func(Request, *Writer) (int, error) { ran = true; return 0, nil })
	for _, c := range []struct{ line, want string }{
		{`{"version":2,"command":"fsck"}`, "control protocol version 2, this daemon speaks 1"},
		{`{"command":"fsck"}`, "control protocol version 0, this daemon speaks 1"},
		{`fsck /srv/t`, "request is not JSON"},
	} {
		r := rawRequest(t, dir, c.line)
		if len(r) != 1 || !strings.Contains(r[0].Error, c.want) || r[0].Exit != nil {
			t.Errorf("request %s: replies %+v; want one error containing %q", c.line, r, c.want)
		}
	}
	if ran {
		t.Error("a bad request ran the handler")
	}
}

// TestPeerRefused connects with an effective uid that is neither the
// owner's nor root's: SO_PEERCRED shows it and the server refuses,
// naming the uid and the owner. The client thread alone changes its uid
// (a raw setresuid on a locked thread that then exits).
func TestPeerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another uid")
	}
	const owner, other = 4242, 65534
	dir, _ := listen(t, owner, echo)
	// The other uid must reach the socket: open the way for this test.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(SocketPath(dir), 0o666); err != nil {
		t.Fatal(err)
	}
	var err error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), other, ^uintptr(0)); e != 0 {
			err = e
			return
		}
		_, err = Call(dir, Request{Command: "x"}, &bytes.Buffer{}, &bytes.Buffer{}, nil)
	}()
	wg.Wait()
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "uid 65534 may not operate this store: only its owner (uid 4242) and root may") {
		t.Errorf("Call as uid %d: %v; want a refusal naming both uids", other, err)
	}
	// Root is served whoever owns the store.
	if code, err := Call(dir, Request{Command: "x", Args: []string{"a"}}, &bytes.Buffer{}, &bytes.Buffer{}, nil); err != nil || code != 1 {
		t.Errorf("Call as root on a store of uid %d: %d, %v; want it served", owner, code, err)
	}
}

// TestStaleSocket: a socket file left by a killed daemon is replaced; any
// other file in its place is an error that names it.
func TestStaleSocket(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: SocketPath(dir), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, with nobody listening: a killed daemon's
	if _, err := Call(dir, Request{}, &bytes.Buffer{}, &bytes.Buffer{}, nil); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Call on a stale socket: %v; want ErrNoDaemon", err)
	}
	srv, err := Listen(dir, os.Geteuid(), echo, nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	if code, err := Call(dir, Request{Args: []string{"a"}}, &bytes.Buffer{}, &bytes.Buffer{}, nil); err != nil || code != 1 {
		t.Errorf("Call after replacing the stale socket: %d, %v", code, err)
	}
	srv.Stop()
	if _, err := os.Lstat(SocketPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Stop the socket is still there: %v", err)
	}
	if _, err := Call(dir, Request{}, &bytes.Buffer{}, &bytes.Buffer{}, nil); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Call after Stop: %v; want ErrNoDaemon", err)
	}
	if err := os.WriteFile(SocketPath(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(dir, os.Geteuid(), echo, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file: %v; want an error saying it is not a socket", err)
	}
}

// TestStopWaits: Stop returns only once the operation in flight has
// finished and sent its exit status; a connection after Stop finds no
// socket.
func TestStopWaits(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	dir, srv := listen(t, os.Geteuid(), func(req Request, w *Writer) (int, error) {
		close(started)
		<-release
		w.Stdout().Write([]byte("done\n"))
		return 0, nil
	})
	type result struct {
		code int
		out  string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		code, err := Call(dir, Request{}, &out, &bytes.Buffer{}, nil)
		res <- result{code, out.String(), err}
	}()
	<-started
	stopped := make(chan struct{})
	go func() { srv.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while an operation was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := Call(dir, Request{}, &bytes.Buffer{}, &bytes.Buffer{}, nil); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Call while stopping: %v; want ErrNoDaemon", err)
	}
	close(release)
	<-stopped
	if r := <-res; r.err != nil || r.code != 0 || r.out != "done\n" {
		t.Errorf("the operation in flight: %+v; want it finished", r)
	}
}

// TestLongStorePath: a store whose socket path is too long for a socket
// address is served and reached through its directory's descriptor.
func TestLongStorePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if len(SocketPath(dir)) <= maxSocketPath {
		t.Fatalf("path %s is short enough for a socket address", SocketPath(dir))
	}
	srv, err := Listen(dir, os.Geteuid(), echo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if _, err := os.Lstat(SocketPath(dir)); err != nil {
		t.Errorf("no socket at %s: %v", SocketPath(dir), err)
	}
	if code, err := Call(dir, Request{Args: []string{"a"}}, &bytes.Buffer{}, &bytes.Buffer{}, nil); err != nil || code != 1 {
		t.Errorf("Call: %d, %v", code, err)
	}
}

// TestStopRefusesSilentClient: a client that connected but sent no
// request yet does not hold Stop up; it gets a refusal saying the daemon
// is stopping.
func TestStopRefusesSilentClient(t *testing.T) {
	dir, srv := listen(t, os.Geteuid(), echo)
	conn, err := net.Dial("unix", SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for waiting := 0; waiting == 0; time.Sleep(time.Millisecond) { // until the server has taken it
		srv.mu.Lock()
		waiting = len(srv.waiting)
		srv.mu.Unlock()
	}
	stopped := make(chan struct{})
	go func() { srv.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(requestTimeout / 2):
		t.Fatal("Stop waited for a client that sent no request")
	}
	var r Reply
	if err := json.NewDecoder(conn).Decode(&r); err != nil || !strings.Contains(r.Error, "the daemon is stopping") {
		t.Errorf("the silent client got %+v, %v; want a refusal saying the daemon is stopping", r, err)
	}
}

// TestHandlerPanic: a handler that panics refuses the request with a
// message and leaves the server serving.
func TestHandlerPanic(t *testing.T) {
	dir, _ := listen(t, os.Geteuid(), func(req Request, w *Writer) (int, error) {
		if req.Command == "boom" {
			panic("boom")
		}
		return 0, nil
	})
	if _, err := Call(dir, Request{Command: "boom"}, &bytes.Buffer{}, &bytes.Buffer{}, nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "a bug") {
		t.Errorf("Call of a panicking handler: %v; want a refusal", err)
	}
	if code, err := Call(dir, Request{}, &bytes.Buffer{}, &bytes.Buffer{}, nil); err != nil || code != 0 {
		t.Errorf("Call after the panic: %d, %v; want the server still serving", code, err)
	}
}

// TestSocketName: the socket is the one file the store's privacy checks
// accept besides its own (store.ControlSocket).
func TestSocketName(t *testing.T) {
	if SocketName != store.ControlSocket {
		t.Errorf("SocketName %q, store.ControlSocket %q: want the same name", SocketName, store.ControlSocket)
	}
}
