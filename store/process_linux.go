package store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// bootIDFile holds this boot's random UUID (random(4)).
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// linuxProcesses implements Processes with pidfds. A pidfd names one
// process and never another, so signals and exit polls through it cannot
// reach a process that reused the PID. The identity read from /proc is
// trusted only if the pidfd's process has not exited after the read: while
// a process (even a zombie) exists its PID cannot be reused.
type linuxProcesses struct {
	// procDir is where per-process directories are read, "/proc". Tests
	// point it at another directory to model a process hidden by hidepid.
	procDir string
}

func hostProcesses() Processes { return linuxProcesses{procDir: "/proc"} }

// Identify opens a pidfd for pid and reads its pidfs inode number, start
// time and the boot ID. Errors: ErrNoProcess (no such PID, a thread that
// is not a thread-group leader, or a process that has exited),
// ErrProcessUninspectable (its /proc entry is hidden or unreadable).
func (p linuxProcesses) Identify(pid int) (ProcessIdentity, error) {
	boot, err := readBootID()
	if err != nil {
		return ProcessIdentity{}, err
	}
	fd, err := openPidfd(pid)
	if err != nil {
		return ProcessIdentity{}, err
	}
	defer unix.Close(fd)
	ino, err := pidfsIno(fd)
	if err != nil {
		return ProcessIdentity{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if p.kernelThread(pid) {
		return ProcessIdentity{}, fmt.Errorf("pid %d is a kernel thread, not a clone: %w", pid, ErrInvalidID)
	}
	start, err := p.startTime(pid, fd)
	if err != nil {
		return ProcessIdentity{}, err
	}
	// Read after /proc: if the pidfd's process had exited and its PID been
	// reused before the read, the start time is another process's.
	exited, err := waitPidfd(fd, 0)
	if err != nil {
		return ProcessIdentity{}, fmt.Errorf("pid %d: poll pidfd: %w", pid, err)
	}
	if exited {
		return ProcessIdentity{}, fmt.Errorf("pid %d has exited: %w", pid, ErrNoProcess)
	}
	return ProcessIdentity{PID: pid, PidfsIno: ino, StartTime: start, BootID: boot}, nil
}

// Check verifies the process named by id: ProcessEarlierBoot if the boot
// ID differs; ProcessExited if no thread-group leader has the PID or the
// pidfd polls readable (the thread group has exited, reaped or a zombie;
// the /proc state "Z" alone is not used, because a leader thread that
// exited before its siblings shows it while the process runs);
// ProcessReused if the process with the PID has another pidfs inode
// number (when both are known) or start time; ProcessUninspectable if the
// start time is needed and /proc hides or refuses it; else ProcessAlive.
func (p linuxProcesses) Check(id ProcessIdentity) (ExitVerdict, error) {
	fd, verdict, err := p.openVerified(id)
	if fd >= 0 {
		unix.Close(fd)
	}
	return verdict, err
}

// openVerified is Check keeping the pidfd: when the verdict is
// ProcessAlive it returns a pidfd verified to name id's process (the
// caller closes it), else fd -1 (exit tracking watches the pidfd).
func (p linuxProcesses) openVerified(id ProcessIdentity) (fd int, verdict ExitVerdict, err error) {
	boot, err := readBootID()
	if err != nil {
		return -1, 0, err
	}
	if boot != id.BootID {
		return -1, ProcessEarlierBoot, nil
	}
	if fd, verdict, err = p.open(id); fd < 0 {
		return -1, verdict, err
	}
	if verdict, err = p.verdict(fd, id); err != nil || verdict != ProcessAlive {
		unix.Close(fd)
		return -1, verdict, err
	}
	return fd, ProcessAlive, nil
}

// Kill sends SIGKILL through a pidfd verified to name id's process, then
// polls the pidfd until the process exits or wait elapses. A killed child
// of this daemon stays a zombie until reaped; the pidfd is readable then,
// so it counts as exited.
func (p linuxProcesses) Kill(id ProcessIdentity, wait time.Duration) (bool, error) {
	boot, err := readBootID()
	if err != nil {
		return false, err
	}
	if boot != id.BootID {
		return true, nil
	}
	fd, verdict, err := p.open(id)
	if fd < 0 {
		return err == nil, err
	}
	defer unix.Close(fd)
	switch verdict, err = p.verdict(fd, id); {
	case err != nil:
		return false, err
	case verdict == ProcessUninspectable:
		return false, fmt.Errorf("kill %v: %w", id, ErrProcessUninspectable)
	case verdict != ProcessAlive:
		return true, nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return true, nil
		}
		return false, fmt.Errorf("kill %v: pidfd_send_signal SIGKILL: %w", id, err)
	}
	exited, err := waitPidfd(fd, wait)
	if err != nil {
		return false, fmt.Errorf("kill %v: poll pidfd: %w", id, err)
	}
	return exited, nil
}

// open opens a pidfd for id.PID. When no thread-group leader has the PID
// (see openPidfd) it returns fd -1 and ProcessExited: the recorded process
// was a leader, and a leader keeps its PID until the whole group is reaped.
func (p linuxProcesses) open(id ProcessIdentity) (fd int, verdict ExitVerdict, err error) {
	fd, err = unix.PidfdOpen(id.PID, 0)
	switch {
	case errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
		return -1, ProcessExited, nil
	case err != nil:
		return -1, 0, fmt.Errorf("pidfd_open pid %d: %w", id.PID, err)
	}
	return fd, ProcessAlive, nil
}

// verdict compares the process behind pidfd fd with id (same boot).
func (p linuxProcesses) verdict(fd int, id ProcessIdentity) (ExitVerdict, error) {
	ino, err := pidfsIno(fd)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", id.PID, err)
	}
	if ino != 0 && id.PidfsIno != 0 {
		if ino != id.PidfsIno {
			return ProcessReused, nil
		}
	} else {
		start, err := p.startTime(id.PID, fd)
		switch {
		case errors.Is(err, ErrNoProcess):
			return ProcessExited, nil
		case errors.Is(err, ErrProcessUninspectable):
			return ProcessUninspectable, nil
		case err != nil:
			return 0, err
		case start != id.StartTime:
			// While the recorded process exists, even as a zombie, no
			// other process can hold its PID.
			return ProcessReused, nil
		}
	}
	exited, err := waitPidfd(fd, 0)
	if err != nil {
		return 0, fmt.Errorf("pid %d: poll pidfd: %w", id.PID, err)
	}
	if exited {
		return ProcessExited, nil
	}
	return ProcessAlive, nil
}

// startTime reads field 22 of <procDir>/<pid>/stat. A missing entry is
// ErrNoProcess if the pidfd's process is gone and ErrProcessUninspectable
// if it still exists (hidepid=invisible hides it); EACCES and EPERM are
// ErrProcessUninspectable.
func (p linuxProcesses) startTime(pid, fd int) (uint64, error) {
	path := filepath.Join(p.procDir, strconv.Itoa(pid), "stat")
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH):
		if exited, perr := waitPidfd(fd, 0); perr == nil && exited {
			return 0, fmt.Errorf("pid %d: %s is gone: %w", pid, path, ErrNoProcess)
		}
		return 0, fmt.Errorf("pid %d is running but %s is missing: %w", pid, path, ErrProcessUninspectable)
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return 0, fmt.Errorf("pid %d: %w: %w", pid, ErrProcessUninspectable, err)
	case err != nil:
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return parseStartTime(path, data)
}

// pfKthread is PF_KTHREAD in the flags field of /proc/<pid>/stat
// (include/linux/sched.h).
const pfKthread = 0x00200000

// kernelThread reports whether pid is a kernel thread: field 9 (flags) of
// its /proc stat line has PF_KTHREAD. A kernel thread never exits the way
// a clone does, so a lease bound to one could never be released.
func (p linuxProcesses) kernelThread(pid int) bool {
	data, err := os.ReadFile(filepath.Join(p.procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false
	}
	const flagsField = 9 - 3
	fields := bytes.Fields(data[i+1:])
	if len(fields) <= flagsField {
		return false
	}
	flags, err := strconv.ParseUint(string(fields[flagsField]), 10, 64)
	return err == nil && flags&pfKthread != 0
}

// parseStartTime extracts starttime from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted after the last ')': field 3 (state)
// is the first there, field 22 the twentieth (proc(5)).
func parseStartTime(path string, data []byte) (uint64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no ')' closing the command name", path)
	}
	fields := bytes.Fields(data[i+1:])
	const startTimeField = 22 - 3
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("%s: %d fields after the command name, want at least %d", path, len(fields), startTimeField+1)
	}
	v, err := strconv.ParseUint(string(fields[startTimeField]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: field 22 (starttime) %q: %w", path, fields[startTimeField], err)
	}
	return v, nil
}

// openPidfd opens a pidfd for a process to be identified. ESRCH (no such
// PID) is ErrNoProcess; so are EINVAL and ENOENT, which pidfd_open returns
// for a PID that names a thread but no thread-group leader (EINVAL before
// Linux 6.x pidfs, ENOENT on 6.18).
func openPidfd(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return -1, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
		return -1, fmt.Errorf("pid %d is not a process (thread-group leader): %v: %w", pid, err, ErrNoProcess)
	case err != nil:
		return -1, fmt.Errorf("pidfd_open pid %d: %w", pid, err)
	}
	return fd, nil
}

// pidfsIno returns the pidfd's inode number when it lives on pidfs
// (f_type PID_FS_MAGIC, Linux 6.9+), else 0: older kernels give every
// pidfd the same anonymous inode.
func pidfsIno(fd int) (uint64, error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return 0, fmt.Errorf("fstatfs pidfd: %w", err)
	}
	if sfs.Type != unix.PID_FS_MAGIC {
		return 0, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("fstat pidfd: %w", err)
	}
	return st.Ino, nil
}

// waitPidfd polls pidfd fd for up to wait and reports whether its process
// has exited: the pidfd is readable once the whole thread group has
// exited, whether or not the parent has reaped it (pidfd_open(2)).
func waitPidfd(fd int, wait time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	for {
		remaining := time.Until(deadline)
		ms := 0
		if remaining > 0 {
			ms = int((remaining + time.Millisecond - 1) / time.Millisecond)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false, err
		case n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0:
			return true, nil
		case n > 0:
			return false, fmt.Errorf("pidfd poll events %#x", fds[0].Revents)
		case ms == 0:
			return false, nil
		}
	}
}

// readBootID returns this boot's ID as 32 lowercase hex digits.
func readBootID() (string, error) {
	id, err := readHex16(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("boot ID: %w", err)
	}
	return hex.EncodeToString(id[:]), nil
}
