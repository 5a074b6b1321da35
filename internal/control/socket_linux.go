package control

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSocketPath is the longest path bind(2) and connect(2) take for a
// Unix socket (sun_path less its terminating NUL).
const maxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

// viaDir calls fn with a path to path's socket: path itself, or, when it
// is too long for a socket address, the same name reached through an
// open descriptor of its directory (/proc/self/fd/N/NAME), which is
// short whatever the store's path.
func viaDir(path string, fn func(addr string) error) error {
	if len(path) <= maxSocketPath {
		return fn(path)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)))
}

func listenUnix(path string) (ln *net.UnixListener, err error) {
	err = viaDir(path, func(addr string) error {
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	return ln, err
}

func dialUnix(path string) (conn *net.UnixConn, err error) {
	err = viaDir(path, func(addr string) error {
		conn, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	return conn, err
}

// peerUID returns the effective uid of the process at the other end of
// conn when it connected (SO_PEERCRED).
func peerUID(conn *net.UnixConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Uid), nil
}
