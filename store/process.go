package store

import (
	"fmt"
	"time"
)

// ProcessIdentity names one process for the life of a boot, so that a
// lease bound to it is never released on the strength of a reused PID.
// A lease records it when bound (BindLease) and compares it when released
// (ReleaseLease, KillLease). Two identities name the same process when
// BootID and PID are equal and, if both carry a PidfsIno, those are
// equal; otherwise StartTime decides (see SameProcess).
type ProcessIdentity struct {
	PID int `json:"pid"`
	// PidfsIno is the inode number of the process's pidfd on pidfs
	// (Linux 6.9 and later), unique among processes of one boot; 0 when
	// the kernel has no pidfs (pidfds are then anonymous inodes) or on
	// other systems.
	PidfsIno uint64 `json:"pidfs_ino"`
	// StartTime is when the process started: on Linux, clock ticks since
	// boot, /proc/<pid>/stat field 22 (starttime, proc(5)); a Windows
	// implementation stores the process creation time (FILETIME, 100 ns
	// units since 1601) here.
	StartTime uint64 `json:"start_time"`
	// BootID is the boot the process belongs to, 32 lowercase hex digits
	// of HostFacts.BootID (Linux /proc/sys/kernel/random/boot_id without
	// dashes; Windows PrefetchParameters\BootId zero-extended, §3.1).
	BootID string `json:"boot_id"`
}

// SameProcess reports whether id and other name the same process: same
// boot and PID, then the pidfs inode numbers when both are non-zero (the
// stronger identity), else the start times.
func (id ProcessIdentity) SameProcess(other ProcessIdentity) bool {
	if id.BootID != other.BootID || id.PID != other.PID {
		return false
	}
	if id.PidfsIno != 0 && other.PidfsIno != 0 {
		return id.PidfsIno == other.PidfsIno
	}
	return id.StartTime == other.StartTime
}

// String renders the identity for log lines and error messages.
func (id ProcessIdentity) String() string {
	return fmt.Sprintf("pid %d (pidfs inode %d, start time %d, boot %s)", id.PID, id.PidfsIno, id.StartTime, id.BootID)
}

// ExitVerdict is what Processes.Check found out about a recorded process.
// Only ProcessAlive and ProcessUninspectable keep a lease; the others
// mean the recorded process has verifiably exited.
type ExitVerdict int

const (
	// ProcessAlive: the recorded process is running (or stopped, or
	// traced); it has not exited.
	ProcessAlive ExitVerdict = iota
	// ProcessExited: no process has the PID any more, or the recorded
	// process has exited and is a zombie not yet reaped by its parent.
	ProcessExited
	// ProcessReused: a different process now has the PID (its identity
	// differs), so the recorded one has exited.
	ProcessReused
	// ProcessEarlierBoot: the identity was recorded during an earlier boot
	// (the boot ID differs), so the process cannot be running.
	ProcessEarlierBoot
	// ProcessUninspectable: the process with the PID exists but this
	// daemon may not read what is needed to compare identities (for
	// example /proc mounted with hidepid), so exit cannot be verified.
	ProcessUninspectable
)

// String returns the verdict's name as logs show it.
func (v ExitVerdict) String() string {
	switch v {
	case ProcessAlive:
		return "alive"
	case ProcessExited:
		return "exited"
	case ProcessReused:
		return "pid-reused"
	case ProcessEarlierBoot:
		return "earlier-boot"
	case ProcessUninspectable:
		return "uninspectable"
	}
	return fmt.Sprintf("ExitVerdict(%d)", int(v))
}

// Processes is the platform's part of lease binding: naming a process by
// an identity that survives PID reuse, and verifying its exit. There is
// one implementation per OS (process_linux.go: pidfd, pidfs and /proc;
// process_windows.go: a process handle, its creation time and its
// signalled state). Options may inject another for tests. Implementations
// must be safe for concurrent use.
type Processes interface {
	// Identify returns the identity of the running process pid. It
	// returns ErrNoProcess when no process has that PID or it has already
	// exited (a zombie), and ErrProcessUninspectable when the process
	// exists but cannot be read.
	Identify(pid int) (ProcessIdentity, error)
	// Check reports whether the process named by id has exited. An error
	// means the check itself failed (for example the boot ID could not be
	// read); the verdict is then meaningless.
	Check(id ProcessIdentity) (ExitVerdict, error)
	// Kill forcibly ends the process named by id (SIGKILL on Linux,
	// TerminateProcess on Windows) if it is still that process, then
	// waits up to wait for it to exit. exited is true when the process
	// has exited (a zombie counts) or was already gone, reused or from an
	// earlier boot; false with a nil error means it survived the wait. It
	// never signals a process whose identity it could not verify: that
	// returns ErrProcessUninspectable.
	Kill(id ProcessIdentity, wait time.Duration) (exited bool, err error)
}
