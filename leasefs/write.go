package leasefs

import (
	"fmt"
	"strings"
)

// MaxCommandLen is the longest write(2) a lease or ctl file parses, in
// bytes; a longer one is ErrBadWrite without being parsed. The longest
// command, "pid 2147483647\n", is 15 bytes.
const MaxCommandLen = 64

// MaxPID is the largest process ID a `pid N` write accepts: 2^31-1, the
// largest positive pid_t (Linux's pid_max is at most 2^22, so every real
// PID fits).
const MaxPID = 1<<31 - 1

// leaseCommand is one parsed write to a lease file: kill, or bind to pid.
type leaseCommand struct {
	kill bool
	pid  int // 1..MaxPID when !kill
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

// commandLine bounds a write to MaxCommandLen bytes and strips one
// trailing newline (echo adds it, printf need not: fuse-and-store-notes.md
// §C2).
func commandLine(data []byte) (string, error) {
	if len(data) > MaxCommandLen {
		return "", fmt.Errorf("write of %d bytes: a command has at most %d: %w", len(data), MaxCommandLen, ErrBadWrite)
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

// parseLeaseWrite parses one write(2) to a lease file. The grammar is
// exact: `pid N` with one space and N a decimal in 1..MaxPID without sign
// or leading zeros, or `kill`; either may end in one "\n". Anything else,
// and anything longer than MaxCommandLen, is ErrBadWrite.
func parseLeaseWrite(data []byte) (leaseCommand, error) {
	s, err := commandLine(data)
	if err != nil {
		return leaseCommand{}, err
	}
	if s == "kill" {
		return leaseCommand{kill: true}, nil
	}
	if digits, ok := strings.CutPrefix(s, "pid "); ok {
		if pid, ok := parsePID(digits); ok {
			return leaseCommand{pid: pid}, nil
		}
	}
	return leaseCommand{}, fmt.Errorf("lease file write %q: want \"pid <1..%d>\" or \"kill\": %w", data, MaxPID, ErrBadWrite)
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

// parseCtlWrite parses one write(2) to a ctl file: exactly one of
// ctlCommands, optionally ending in one "\n". Anything else is
// ErrBadWrite.
func parseCtlWrite(data []byte) (ctlCommand, error) {
	s, err := commandLine(data)
	if err != nil {
		return "", err
	}
	for _, c := range ctlCommands {
		if s == string(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("ctl write %q: want one of %q: %w", data, ctlCommands, ErrBadWrite)
}

// Write is write(2) of data to file node n by c. Each call is one whole
// command, whatever the file offset (sysfs style), and returns len(data)
// once the command has taken effect durably:
//
//   - lease file, `pid N`: store.BindLease binds the lease to process N;
//   - lease file, `kill`: store.KillLease sends SIGKILL through a pidfd,
//     waits up to Options.KillWait, then releases the lease;
//   - ctl file, `tombstone`, `lift`, `retire`: store.Tombstone, store.Lift,
//     store.Retire on the file's generation, recording c's uid. Each is
//     idempotent: tombstoning a tombstoned or retiring generation, lifting
//     a published one or retiring a retiring one succeeds unchanged.
//
// A lease write names the lease by clone ID; a write racing with a release
// and re-acquisition of the same clone ID can reach the new lease. Errors:
// ErrAccess, ErrBadWrite, ErrReadOnly for any other node, store.ErrNotFound
// when the lease or generation is gone, BindLease's store.ErrLeaseBound,
// store.ErrNoProcess, store.ErrProcessUninspectable, KillLease's
// store.ErrTeardownFailed and ReleaseLease's errors, Lift's
// store.ErrRetiring, Retire's store.ErrNotTombstoned. A refusal of a lease
// or ctl write is remembered as its generation's last refusal.
func (f *FS) Write(n Node, data []byte, c Caller) (int, error) {
	var err error
	switch n.kind {
	case KindLeaseFile:
		err = f.writeLease(n, data, c)
	case KindCtlFile:
		err = f.writeCtl(n, data, c)
	default:
		if err = f.authorize(c, "write "+n.String()); err == nil {
			err = fmt.Errorf("write %s: %w", n, ErrReadOnly)
		}
	}
	if err != nil {
		return 0, err
	}
	return len(data), nil
}

func (f *FS) writeLease(n Node, data []byte, c Caller) (err error) {
	l, lerr := f.lease(n)
	if lerr == nil {
		defer func() { f.refusals.note(l.Generation, "write lease "+n.name, err) }()
	}
	if err := f.authorize(c, "write "+n.String()); err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	cmd, err := parseLeaseWrite(data)
	if err != nil {
		return fmt.Errorf("write %s: %w", n, err)
	}
	// By sequence number: a stale handle must not reach a newer lease of
	// the same clone ID.
	if cmd.kill {
		return f.st.KillLeaseSeq(n.name, n.num, f.killWait)
	}
	_, err = f.st.BindLeaseSeq(n.name, n.num, cmd.pid)
	return err
}

func (f *FS) writeCtl(n Node, data []byte, c Caller) (err error) {
	gen := n.Generation()
	op := "write ctl"
	defer func() { f.refusals.note(gen, op, err) }()
	if err := f.authorize(c, "write "+n.String()); err != nil {
		return err
	}
	cmd, err := parseCtlWrite(data)
	if err != nil {
		return fmt.Errorf("write %s: %w", n, err)
	}
	op = "ctl " + string(cmd)
	switch cmd {
	case ctlTombstone:
		_, err = f.st.Tombstone(gen, c.UID)
	case ctlLift:
		_, err = f.st.Lift(gen)
	case ctlRetire:
		_, err = f.st.Retire(gen, c.UID)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", cmd, gen, err)
	}
	return nil
}
