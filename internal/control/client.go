package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
)

// Call runs req on the daemon serving the store directory dir: it
// connects to the control socket, sends req and relays the replies as
// they come, stdout and stderr to the writers and progress to progress
// (if not nil). It returns the operation's exit status. It returns an
// error wrapping ErrNoDaemon when nothing answers on the socket,
// ErrRefused with the daemon's reason when the daemon refused the
// request, ErrUnsupported where the channel is not built (Windows), and
// another error when the connection ends before the exit status (the
// daemon died).
func Call(dir string, req Request, stdout, stderr io.Writer, progress func(Progress)) (int, error) {
	path := SocketPath(dir)
	conn, err := dialUnix(path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return 0, fmt.Errorf("%s: %w (%v)", path, ErrNoDaemon, err)
		}
		return 0, fmt.Errorf("control socket %s: %w", path, err)
	}
	defer conn.Close()
	req.Version = Version
	// A daemon that refuses the peer answers before it reads the request
	// and closes: the send may then fail (EPIPE) while its refusal waits
	// to be read, so replies are read either way.
	sendErr := json.NewEncoder(conn).Encode(req)
	dec := json.NewDecoder(bufio.NewReader(conn))
	for {
		var r Reply
		if err := dec.Decode(&r); err != nil {
			if sendErr != nil {
				return 0, fmt.Errorf("control socket %s: send the request: %w", path, sendErr)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return 0, fmt.Errorf("control socket %s: the daemon closed the connection before the operation finished (did it die? see its log)", path)
			}
			return 0, fmt.Errorf("control socket %s: read a reply: %w", path, err)
		}
		switch {
		case r.Error != "":
			return 0, fmt.Errorf("%w: %s", ErrRefused, r.Error)
		case r.Stdout != "":
			io.WriteString(stdout, r.Stdout)
		case r.Stderr != "":
			io.WriteString(stderr, r.Stderr)
		case r.Progress != nil:
			if progress != nil {
				progress(*r.Progress)
			}
		case r.Exit != nil:
			return *r.Exit, nil
		}
	}
}

// Serving reports whether a daemon answers on the control socket of the
// store directory dir: it connects and hangs up at once, sending nothing.
func Serving(dir string) bool {
	conn, err := dialUnix(SocketPath(dir))
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
