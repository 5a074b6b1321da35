//go:build windows

package store

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/windows"
)

// windowsProcesses implements Processes with process handles. While any
// handle to a process is open, even after it has exited, Windows does not
// reuse its PID, so what is read and done through a handle concerns the
// process it was opened for. Identity is the PID with the process's
// creation time (GetProcessTimes); exit is the handle's signalled state.
// GetExitCodeProcess is not used: STILL_ACTIVE (259) is also a valid exit
// code.
type windowsProcesses struct{}

func hostProcesses() Processes { return windowsProcesses{} }

// queryAccess is what identifying and checking need: creation time and
// waiting for exit.
const queryAccess = windows.SYNCHRONIZE | windows.PROCESS_QUERY_LIMITED_INFORMATION

// Identify opens pid and reads its creation time and the boot ID. Errors:
// ErrNoProcess (no such PID, or the process has exited),
// ErrProcessUninspectable (access denied, for example another user's
// protected process).
func (windowsProcesses) Identify(pid int) (ProcessIdentity, error) {
	boot, err := bootIDText()
	if err != nil {
		return ProcessIdentity{}, err
	}
	h, verdict, err := openProcess(pid, queryAccess)
	switch {
	case err != nil:
		return ProcessIdentity{}, err
	case verdict == ProcessExited:
		return ProcessIdentity{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	case verdict == ProcessUninspectable:
		return ProcessIdentity{}, fmt.Errorf("pid %d: %w", pid, ErrProcessUninspectable)
	}
	defer windows.CloseHandle(h)
	start, err := creationTime(h)
	if err != nil {
		return ProcessIdentity{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	exited, err := waitProcess(h, 0)
	if err != nil {
		return ProcessIdentity{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if exited {
		return ProcessIdentity{}, fmt.Errorf("pid %d has exited: %w", pid, ErrNoProcess)
	}
	return ProcessIdentity{PID: pid, StartTime: start, BootID: boot}, nil
}

// Check verifies the process named by id: ProcessEarlierBoot if the boot
// ID differs; ProcessExited if no process has the PID or the one that has
// it has exited (its handle is signalled; someone still holds a handle,
// like a zombie); ProcessReused if its creation time differs;
// ProcessUninspectable if it may not be opened; else ProcessAlive.
func (windowsProcesses) Check(id ProcessIdentity) (ExitVerdict, error) {
	h, verdict, err := openVerified(id)
	if h != 0 {
		windows.CloseHandle(h)
	}
	return verdict, err
}

// openVerified returns a query handle on the process id names, and
// ProcessAlive, if that process still runs (the caller closes the
// handle); otherwise no handle and Check's verdict.
func openVerified(id ProcessIdentity) (windows.Handle, ExitVerdict, error) {
	boot, err := bootIDText()
	if err != nil {
		return 0, 0, err
	}
	if boot != id.BootID {
		return 0, ProcessEarlierBoot, nil
	}
	h, verdict, err := openProcess(id.PID, queryAccess)
	if err != nil || h == 0 {
		return 0, verdict, err
	}
	if verdict, err = handleVerdict(h, id); err != nil || verdict != ProcessAlive {
		windows.CloseHandle(h)
		return 0, verdict, err
	}
	return h, ProcessAlive, nil
}

// Kill terminates the process named by id with TerminateProcess (exit
// code killedExitCode) once Check's comparison through a query handle
// finds it alive, then waits on that handle up to wait. The second,
// terminate-only handle opened meanwhile names the same process: the
// query handle keeps the PID from being reused.
func (windowsProcesses) Kill(id ProcessIdentity, wait time.Duration) (bool, error) {
	boot, err := bootIDText()
	if err != nil {
		return false, err
	}
	if boot != id.BootID {
		return true, nil
	}
	h, verdict, err := openProcess(id.PID, queryAccess)
	switch {
	case err != nil:
		return false, err
	case verdict == ProcessUninspectable:
		return false, fmt.Errorf("kill %v: %w", id, ErrProcessUninspectable)
	case h == 0:
		return true, nil
	}
	defer windows.CloseHandle(h)
	switch verdict, err = handleVerdict(h, id); {
	case err != nil:
		return false, err
	case verdict != ProcessAlive:
		return true, nil
	}
	t, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(id.PID))
	if err != nil {
		return false, fmt.Errorf("kill %v: open for termination: %w", id, err)
	}
	err = windows.TerminateProcess(t, killedExitCode)
	windows.CloseHandle(t)
	if err != nil {
		// TerminateProcess fails with access denied on a process that is
		// already exiting.
		if exited, werr := waitProcess(h, 0); werr == nil && exited {
			return true, nil
		}
		return false, fmt.Errorf("kill %v: TerminateProcess: %w", id, err)
	}
	exited, err := waitProcess(h, wait)
	if err != nil {
		return false, fmt.Errorf("kill %v: %w", id, err)
	}
	return exited, nil
}

// openProcess opens pid with access. It returns a zero handle and
// ProcessExited when no process has the PID (ERROR_INVALID_PARAMETER, as
// OpenProcess reports it), and a zero handle and ProcessUninspectable when
// access is denied.
func openProcess(pid int, access uint32) (windows.Handle, ExitVerdict, error) {
	if pid <= 0 || uint64(pid) > math.MaxUint32 {
		return 0, ProcessExited, nil
	}
	h, err := windows.OpenProcess(access, false, uint32(pid))
	switch {
	case errors.Is(err, windows.ERROR_INVALID_PARAMETER):
		return 0, ProcessExited, nil
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		return 0, ProcessUninspectable, nil
	case err != nil:
		return 0, 0, fmt.Errorf("OpenProcess pid %d: %w", pid, err)
	}
	return h, ProcessAlive, nil
}

// handleVerdict compares the process behind h with id (same boot).
func handleVerdict(h windows.Handle, id ProcessIdentity) (ExitVerdict, error) {
	start, err := creationTime(h)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", id.PID, err)
	}
	if start != id.StartTime {
		return ProcessReused, nil
	}
	exited, err := waitProcess(h, 0)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", id.PID, err)
	}
	if exited {
		return ProcessExited, nil
	}
	return ProcessAlive, nil
}

// creationTime returns the process's creation time as a FILETIME: 100 ns
// units since 1601-01-01 UTC.
func creationTime(h windows.Handle) (uint64, error) {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, fmt.Errorf("GetProcessTimes: %w", err)
	}
	return uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime), nil
}

// waitProcess waits up to wait for the process behind h to exit and
// reports whether it has.
func waitProcess(h windows.Handle, wait time.Duration) (bool, error) {
	ms := uint64((wait + time.Millisecond - 1) / time.Millisecond)
	ms = min(ms, windows.INFINITE-1)
	ev, err := windows.WaitForSingleObject(h, uint32(ms))
	switch {
	case err != nil:
		return false, fmt.Errorf("wait for process: %w", err)
	case ev == windows.WAIT_OBJECT_0:
		return true, nil
	case ev == uint32(windows.WAIT_TIMEOUT):
		return false, nil
	}
	return false, fmt.Errorf("wait for process: WaitForSingleObject returned %#x", ev)
}

// bootIDText returns this boot's ID (readPrefetchBootID) as 32 lowercase
// hex digits, the form ProcessIdentity.BootID records.
func bootIDText() (string, error) {
	id, err := readPrefetchBootID()
	if err != nil {
		return "", fmt.Errorf("boot ID: %w", err)
	}
	return hex.EncodeToString(id[:]), nil
}
