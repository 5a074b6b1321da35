package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// Handler runs one request and returns its exit status. It writes the
// operation's output through w as it goes. A non-nil error means the
// request was refused and not run (an unknown command, say): the client
// gets it as the Error reply instead of an exit status.
type Handler func(req Request, w *Writer) (exit int, err error)

// Server serves one store's control socket. Each connection runs in its
// own goroutine, so operations run concurrently, as separate commands
// would offline; the store serialises what must be.
type Server struct {
	ln     *net.UnixListener
	path   string
	sock   os.FileInfo // the socket file Listen made, so Stop removes only that one
	owner  int
	handle Handler
	log    *slog.Logger

	mu       sync.Mutex
	stopping bool
	waiting  map[*net.UnixConn]bool // connections whose request is not read yet
	running  sync.WaitGroup         // one per connection being served
}

// Listen makes the control socket of the store directory dir and serves
// it with handle until Stop. The caller must hold the store's lock: then
// no other daemon serves the store, and a socket file already there is a
// stale one left by a daemon that was killed, which Listen replaces. Any
// other kind of file at that name is an error. The socket has mode 0600
// (owner only); peers are further checked by uid: owner (the store's
// owner) and root are served, any other uid is refused with a message
// saying so.
func Listen(dir string, owner int, handle Handler, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	path := SocketPath(dir)
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("control socket %s: a %v is in its place, not a socket: remove it", path, fi.Mode().Type())
		}
		log.Info("replacing the control socket left by a daemon that is gone", "socket", path)
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("control socket %s: remove the stale one: %w", path, err)
		}
	}
	ln, err := listenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // Stop removes it, and only if it is still this one
	fail := func(err error) (*Server, error) {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fail(err)
	}
	sock, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	s := &Server{ln: ln, path: path, sock: sock, owner: owner, handle: handle, log: log, waiting: map[*net.UnixConn]bool{}}
	go s.accept()
	return s, nil
}

func (s *Server) accept() {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("control socket: accept failed; no more operations are taken", "socket", s.path, "err", err)
			}
			return
		}
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			refuse(conn, errStopping.Error())
			conn.Close()
			continue
		}
		s.running.Add(1)
		s.waiting[conn] = true
		s.mu.Unlock()
		go func() {
			defer s.running.Done()
			s.serve(conn)
		}()
	}
}

// Stop stops taking new operations: it closes the socket and removes its
// file (unless another daemon has replaced it meanwhile), then waits for
// the operations in flight to finish. Clients that connect meanwhile get
// a refusal or find no socket, and so do those connected whose request
// has not arrived yet. Stop may be called more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	first := !s.stopping
	s.stopping = true
	for conn := range s.waiting {
		conn.SetReadDeadline(time.Now()) // their serve refuses them
	}
	s.mu.Unlock()
	if first {
		s.ln.Close()
		if fi, err := os.Lstat(s.path); err == nil && os.SameFile(fi, s.sock) {
			os.Remove(s.path)
		}
	}
	s.running.Wait()
}

// serve runs the one operation of conn.
func (s *Server) serve(conn *net.UnixConn) {
	defer conn.Close()
	uid, err := peerUID(conn)
	if err != nil {
		refuse(conn, fmt.Sprintf("cannot identify the peer (SO_PEERCRED): %v", err))
		return
	}
	if uid != s.owner && uid != 0 {
		s.log.Warn("control socket: refused a peer that may not operate the store", "uid", uid, "owner", s.owner)
		refuse(conn, fmt.Sprintf("uid %d may not operate this store: only its owner (uid %d) and root may", uid, s.owner))
		return
	}
	line, err := s.readRequest(conn)
	if err != nil {
		refuse(conn, err.Error())
		return
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		refuse(conn, fmt.Sprintf("request is not JSON: %v", err))
		return
	}
	if req.Version != Version {
		refuse(conn, fmt.Sprintf("request speaks control protocol version %d, this daemon speaks %d: run the templatefs binary that the daemon runs, or restart the daemon with this one", req.Version, Version))
		return
	}
	w := &Writer{enc: json.NewEncoder(conn), progress: req.Progress}
	s.log.Info("control: running operation", "command", req.Command, "args", req.Args, "uid", uid)
	exit, err := s.run(req, w)
	if err != nil {
		w.send(Reply{Error: err.Error()})
		return
	}
	w.send(Reply{Exit: &exit})
	s.log.Info("control: operation done", "command", req.Command, "exit", exit)
}

// readRequest reads conn's request line, unless the server stops first.
func (s *Server) readRequest(conn *net.UnixConn) ([]byte, error) {
	defer func() {
		s.mu.Lock()
		delete(s.waiting, conn)
		s.mu.Unlock()
	}()
	s.mu.Lock() // so that Stop's deadline comes after this one
	stopping := s.stopping
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	s.mu.Unlock()
	if stopping {
		return nil, errStopping
	}
	line, err := bufio.NewReaderSize(conn, maxRequest).ReadSlice('\n')
	s.mu.Lock()
	stopping = s.stopping
	s.mu.Unlock()
	switch {
	case err != nil && stopping:
		return nil, errStopping
	case err != nil:
		return nil, fmt.Errorf("no request line of at most %d bytes within %v: %v", maxRequest, requestTimeout, err)
	}
	conn.SetReadDeadline(time.Time{})
	return line, nil
}

var errStopping = errors.New("the daemon is stopping: run the command again once it has stopped or a new one has started")

// run runs the handler; a panic in it is logged with its stack and
// refuses the request instead of ending the daemon.
func (s *Server) run(req Request, w *Writer) (exit int, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("control: operation panicked", "command", req.Command, "args", req.Args, "panic", r, "stack", string(debug.Stack()))
			exit, err = 0, fmt.Errorf("the operation failed inside the daemon (a bug: see its log): %v", r)
		}
	}()
	return s.handle(req, w)
}

// Bounds on a request: its line's length, and how long the server waits
// for it after the connection is made.
const (
	maxRequest     = 64 << 10
	requestTimeout = 10 * time.Second
)

// refuse sends msg as the Error reply; the caller closes conn.
func refuse(conn net.Conn, msg string) {
	json.NewEncoder(conn).Encode(Reply{Error: msg})
}

// Writer sends an operation's output to the client as Reply lines. Its
// methods are safe for concurrent use. Once the client is gone writes
// are dropped: the operation still runs to its end, as it would offline
// had its terminal closed.
type Writer struct {
	mu       sync.Mutex
	enc      *json.Encoder
	err      error // the first failed send
	progress bool  // the client asked for Progress replies
	lastSent time.Time
}

func (w *Writer) send(r Reply) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.enc.Encode(r)
	}
}

// Stdout is the operation's standard output.
func (w *Writer) Stdout() io.Writer { return stream{w, false} }

// Stderr is the operation's standard error.
func (w *Writer) Stderr() io.Writer { return stream{w, true} }

// WantsProgress reports whether the client renders progress.
func (w *Writer) WantsProgress() bool { return w.progress }

// Progress reports that done of total bytes of step label are done. It
// sends at most about ten replies a second, and always the last one
// (done == total), and nothing unless the client asked for progress.
func (w *Writer) Progress(label string, done, total int64) {
	if !w.progress {
		return
	}
	w.mu.Lock()
	now := time.Now()
	skip := done < total && now.Sub(w.lastSent) < progressInterval
	if !skip {
		w.lastSent = now
	}
	w.mu.Unlock()
	if !skip {
		w.send(Reply{Progress: &Progress{Label: label, Done: done, Total: total}})
	}
}

const progressInterval = 100 * time.Millisecond

type stream struct {
	w      *Writer
	stderr bool
}

func (s stream) Write(p []byte) (int, error) {
	if s.stderr {
		s.w.send(Reply{Stderr: string(p)})
	} else {
		s.w.send(Reply{Stdout: string(p)})
	}
	return len(p), nil
}
