package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// launchOf reads the launch ID that the thread or process id carries in
// its initial environment (/proc/<id>/environ; "" if none) and the ID of
// its process (the Tgid of /proc/<id>/status: FUSE reports the calling
// thread, and a lease binds the whole process). Errors: ErrNoProcess (no
// such thread, or it has exited), ErrProcessUninspectable (the daemon
// may not read the environment: another user's process while the daemon
// is not root, or /proc with hidepid).
func launchOf(id int) (launch string, pid int, err error) {
	dir := filepath.Join("/proc", strconv.Itoa(id))
	pid, err = tgidOf(dir)
	if err != nil {
		return "", 0, err
	}
	environ, err := readProcFile(filepath.Join(dir, "environ"))
	if err != nil {
		return "", 0, err
	}
	return launchValue(environ), pid, nil
}

// tgidOf reads the Tgid line of <dir>/status.
func tgidOf(dir string) (int, error) {
	data, err := readProcFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Tgid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return 0, fmt.Errorf("%s/status: Tgid %q: %w", dir, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s/status has no Tgid line", dir)
}

// readProcFile reads a /proc file, mapping a vanished process to
// ErrNoProcess and a refused read to ErrProcessUninspectable.
func readProcFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH):
		return nil, fmt.Errorf("%s: %w", path, ErrNoProcess)
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return nil, fmt.Errorf("%s: %w: %w", path, ErrProcessUninspectable, err)
	case err != nil:
		return nil, err
	}
	return data, nil
}

// launchCarriers lists the processes of this boot, other than this one,
// whose initial environment carries launch ID launch (LaunchEnv), by
// reading every /proc/<pid>/environ. A process that exits during the
// scan is not a carrier; one whose environment the daemon may not read
// (another user's, while the daemon is not root; or hidden by hidepid)
// is skipped and counted in skipped. A zombie's environment reads empty:
// an exited clone carries nothing.
func launchCarriers(launch string) (pids []int, skipped int, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, 0, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		environ, err := readProcFile(filepath.Join("/proc", e.Name(), "environ"))
		switch {
		case errors.Is(err, ErrNoProcess):
			continue
		case errors.Is(err, ErrProcessUninspectable):
			skipped++
			continue
		case err != nil:
			return nil, 0, err
		}
		if launchValue(environ) == launch {
			pids = append(pids, pid)
		}
	}
	return pids, skipped, nil
}
