// Package control is the channel through which a templatefs command hands
// its operation to the daemon that has the store open (templatefs mount):
// an owner-only Unix socket in the store directory, SocketName next to the
// lock file, and a small versioned protocol of JSON lines.
//
// A client connects, sends one Request line and reads Reply lines until
// one carries Exit or Error; then the server closes the connection. One
// connection runs one operation. The server checks the peer's uid with
// SO_PEERCRED before it reads the request: only the store's owner and
// root may operate the store, the rule the mounted tree enforces, and the
// daemon runs the operation as the store's owner, so the channel lets a
// caller do nothing its own uid could not do to the store offline.
//
// Protocol version 1 (Version):
//
//	request:  {"version":1,"command":"fsck","args":["--digests=true","--","/srv/t"],"progress":true}
//	replies:  {"stdout":"..."} {"stderr":"..."} {"progress":{"label":"hash","done":1024,"total":4096}}
//	last:     {"exit":0}   or, when the operation was refused before it ran, {"error":"..."}
//
// A request with another version, an unknown command or a peer that may
// not operate the store gets an Error reply that says so.
package control

import (
	"errors"
	"path/filepath"
)

// Version is the protocol version this build speaks. A change that an
// older peer would misread gets a new version.
const Version = 1

// SocketName is the control socket's name in the store directory: the
// store's own ControlSocket, which its privacy checks accept (a test
// holds the two equal; this package does not import the store, so it
// builds wherever the CLI does).
const SocketName = "control.sock"

// SocketPath returns the control socket's path in the store directory dir.
func SocketPath(dir string) string { return filepath.Join(dir, SocketName) }

// Request asks the daemon to run one command. Args are the command's
// flags and arguments as the daemon parses them again: every path in them
// is absolute, since the daemon does not share the caller's working
// directory. Progress asks for Progress replies (the caller renders them
// on a terminal).
type Request struct {
	Version  int      `json:"version"`
	Command  string   `json:"command"`
	Args     []string `json:"args"`
	Progress bool     `json:"progress,omitempty"`
}

// Reply is one line the daemon sends back: output of the operation as it
// runs, then its exit status, or an Error when it was not run.
type Reply struct {
	Stdout   string    `json:"stdout,omitempty"`
	Stderr   string    `json:"stderr,omitempty"`
	Progress *Progress `json:"progress,omitempty"`
	Exit     *int      `json:"exit,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Progress is how far a long step of the operation is: Done of Total
// bytes, of the step named Label (such as "copy" or "hash").
type Progress struct {
	Label string `json:"label"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// ErrRefused is the error of an operation the daemon refused to run (an
// Error reply): another protocol version, an unknown command, a peer that
// may not operate the store, a daemon that is stopping.
var ErrRefused = errors.New("the daemon refused the operation")

// ErrNoDaemon is the error when no daemon answers on the store's control
// socket: none runs, it has not started its control server yet, or it
// died.
var ErrNoDaemon = errors.New("no daemon answers on the control socket")

// ErrUnsupported is Listen's and Call's error where the channel is not
// built: it needs SO_PEERCRED, which only Linux has here; elsewhere
// commands run only while the store is not mounted.
var ErrUnsupported = errors.New("the control channel is not supported")
