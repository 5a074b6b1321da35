package store

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// wakeToken is the epoll token of the poller's eventfd; watch tokens
// start at 1.
const wakeToken = 0

// epollPoller watches pidfds with one epoll instance: a pidfd polls
// readable once its process has exited (pidfd_open(2)), whether or not it
// has been reaped. An eventfd wakes epoll_wait for interrupt.
type epollPoller struct {
	procs linuxProcesses
	epfd  int
	wake  int // eventfd, written by interrupt

	mu     sync.Mutex
	closed bool
	fds    map[uint64]int // token -> pidfd
}

func (p linuxProcesses) newExitPoller() (exitPoller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := epollEvent(wakeToken)
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll_ctl add eventfd: %w", err)
	}
	return &epollPoller{procs: p, epfd: epfd, wake: wake, fds: map[uint64]int{}}, nil
}

// epollEvent is an EPOLLIN event carrying token as its 64-bit user data
// (the Fd and Pad fields together; the kernel hands them back as set).
func epollEvent(token uint64) unix.EpollEvent {
	return unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(uint32(token)), Pad: int32(uint32(token >> 32))}
}

func eventToken(ev unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

func (e *epollPoller) add(token uint64, id ProcessIdentity) (ExitVerdict, error) {
	fd, verdict, err := e.procs.openVerified(id)
	if fd < 0 {
		return verdict, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		unix.Close(fd)
		return 0, errPollerClosed
	}
	// Level-triggered: a process that exited since the check is reported
	// by the next epoll_wait.
	ev := epollEvent(token)
	if err := unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return 0, fmt.Errorf("watch %v: epoll_ctl add pidfd: %w", id, err)
	}
	e.fds[token] = fd
	return ProcessAlive, nil
}

func (e *epollPoller) remove(token uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if fd, ok := e.fds[token]; ok {
		e.closeLocked(token, fd)
	}
}

// closeLocked stops watching token's pidfd fd and closes it.
func (e *epollPoller) closeLocked(token uint64, fd int) {
	unix.EpollCtl(e.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	unix.Close(fd)
	delete(e.fds, token)
}

func (e *epollPoller) wait() ([]uint64, error) {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(e.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("epoll_wait: %w", err)
		}
		var exited []uint64
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, errPollerClosed
		}
		for _, ev := range events[:n] {
			token := eventToken(ev)
			// A token removed after epoll_wait returned is gone from fds.
			if fd, ok := e.fds[token]; ok && token != wakeToken {
				e.closeLocked(token, fd)
				exited = append(exited, token)
			}
		}
		e.mu.Unlock()
		if len(exited) > 0 {
			return exited, nil
		}
	}
}

func (e *epollPoller) interrupt() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0} // an eventfd write is a host-order uint64; any non-zero value wakes it
	unix.Write(e.wake, one)
}

func (e *epollPoller) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for token, fd := range e.fds {
		e.closeLocked(token, fd)
	}
	unix.Close(e.wake)
	unix.Close(e.epfd)
}
