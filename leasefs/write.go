package leasefs

import (
	"fmt"
	"strings"
)

// MaxCommandLen is the longest command line a lease or ctl file parses,
// in bytes, without its newline; a longer one is ErrBadWrite without
// being parsed. The longest command, "pid 2147483647", is 14 bytes.
const MaxCommandLen = 64

// MaxPID is the largest process ID a `pid N` write accepts: 2^31-1, the
// largest positive pid_t (Linux's pid_max is at most 2^22, so every real
// PID fits).
const MaxPID = 1<<31 - 1

// leaseCommand is one parsed write to a lease file: kill, cancel, or
// bind to pid.
type leaseCommand struct {
	kill   bool
	cancel bool
	pid    int // 1..MaxPID when neither kill nor cancel
}

// ctlCommand is one parsed write to a ctl file.
type ctlCommand string

// The ctl commands, each the file-write twin of a rename or rmdir.
const (
	ctlTombstone ctlCommand = "tombstone" // mv generations/<gen> tombstones/<gen>
	ctlLift      ctlCommand = "lift"      // mv tombstones/<gen> generations/<gen>
	ctlRetire    ctlCommand = "retire"    // rmdir tombstones/<gen>
)

// ctlCommands are the accepted ctl commands, in the order reading a ctl
// file lists them.
var ctlCommands = []ctlCommand{ctlTombstone, ctlLift, ctlRetire}

// ctlText is what reading a ctl file returns: its commands, one a line.
var ctlText = func() []byte {
	var b strings.Builder
	for _, c := range ctlCommands {
		b.WriteString(string(c))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}()

// commandLine bounds a command line (without its newline) to
// MaxCommandLen bytes.
func commandLine(line []byte) (string, error) {
	if len(line) > MaxCommandLen {
		return "", fmt.Errorf("command line of %d bytes: a command has at most %d: %w", len(line), MaxCommandLen, ErrBadWrite)
	}
	return string(line), nil
}

// parseLeaseWrite parses one command line (without its newline) written
// to a lease file. The grammar is exact: `pid N` with one space and N a
// decimal in 1..MaxPID without sign or leading zeros, `kill`, or
// `cancel`. Anything else, and anything longer than MaxCommandLen, is
// ErrBadWrite.
func parseLeaseWrite(line []byte) (leaseCommand, error) {
	s, err := commandLine(line)
	if err != nil {
		return leaseCommand{}, err
	}
	switch s {
	case "kill":
		return leaseCommand{kill: true}, nil
	case "cancel":
		return leaseCommand{cancel: true}, nil
	}
	if digits, ok := strings.CutPrefix(s, "pid "); ok {
		if pid, ok := parsePID(digits); ok {
			return leaseCommand{pid: pid}, nil
		}
	}
	return leaseCommand{}, fmt.Errorf("lease file command %q: want \"pid <1..%d>\", \"kill\" or \"cancel\": %w", line, MaxPID, ErrBadWrite)
}

// parsePID parses a decimal in 1..MaxPID with no sign and no leading zero.
func parsePID(s string) (int, bool) {
	if len(s) == 0 || len(s) > len("2147483647") || s[0] == '0' {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > MaxPID {
		return 0, false
	}
	return int(n), true
}

// parseCtlWrite parses one command line (without its newline) written to
// a ctl file: exactly one of ctlCommands. Anything else is ErrBadWrite.
func parseCtlWrite(line []byte) (ctlCommand, error) {
	s, err := commandLine(line)
	if err != nil {
		return "", err
	}
	for _, c := range ctlCommands {
		if s == string(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("ctl command %q: want one of %q: %w", line, ctlCommands, ErrBadWrite)
}
