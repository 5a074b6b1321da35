//go:build !linux

package control

import (
	"fmt"
	"net"
	"runtime"
)

var errUnsupported = fmt.Errorf("%w on %s", ErrUnsupported, runtime.GOOS)

func listenUnix(string) (*net.UnixListener, error) { return nil, errUnsupported }

func dialUnix(string) (*net.UnixConn, error) { return nil, errUnsupported }

func peerUID(*net.UnixConn) (int, error) { return 0, errUnsupported }
