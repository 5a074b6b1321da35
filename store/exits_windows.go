package store

import (
	"fmt"
	"sync"

	"golang.org/x/sys/windows"
)

// handlePoller watches process handles, one goroutine each: it waits on
// the process handle (signalled when the process exits) and on a cancel
// event that remove and close set.
type handlePoller struct {
	wg     sync.WaitGroup
	notify chan struct{} // holds a token while exited is non-empty
	done   chan struct{} // closed by interrupt

	mu          sync.Mutex
	interrupted bool
	watches     map[uint64]*handleWatch
	exited      []uint64
}

// handleWatch is one watched process: its handle and the cancel event.
// The goroutine waiting on them closes both.
type handleWatch struct {
	process, cancel windows.Handle
}

func (windowsProcesses) newExitPoller() (exitPoller, error) {
	return &handlePoller{notify: make(chan struct{}, 1), done: make(chan struct{}), watches: map[uint64]*handleWatch{}}, nil
}

func (p *handlePoller) add(token uint64, id ProcessIdentity) (ExitVerdict, error) {
	h, verdict, err := openVerified(id)
	if err != nil || h == 0 {
		return verdict, err
	}
	cancel, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		windows.CloseHandle(h)
		return 0, fmt.Errorf("watch %v: CreateEvent: %w", id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.interrupted {
		windows.CloseHandle(h)
		windows.CloseHandle(cancel)
		return 0, errPollerClosed
	}
	w := &handleWatch{process: h, cancel: cancel}
	p.watches[token] = w
	p.wg.Add(1)
	go p.await(token, w)
	return ProcessAlive, nil
}

// await waits for w's process to exit or its cancel event. An exit of a
// watch not removed meanwhile is queued for wait.
func (p *handlePoller) await(token uint64, w *handleWatch) {
	defer p.wg.Done()
	ev, err := windows.WaitForMultipleObjects([]windows.Handle{w.process, w.cancel}, false, windows.INFINITE)
	p.mu.Lock()
	if p.watches[token] == w {
		delete(p.watches, token)
		if err == nil && ev == windows.WAIT_OBJECT_0 {
			p.exited = append(p.exited, token)
			select {
			case p.notify <- struct{}{}:
			default:
			}
		}
	}
	p.mu.Unlock()
	windows.CloseHandle(w.process)
	windows.CloseHandle(w.cancel)
}

func (p *handlePoller) remove(token uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.watches[token]; w != nil {
		delete(p.watches, token)
		windows.SetEvent(w.cancel)
	}
}

func (p *handlePoller) wait() ([]uint64, error) {
	for {
		p.mu.Lock()
		switch {
		case p.interrupted:
			p.mu.Unlock()
			return nil, errPollerClosed
		case len(p.exited) > 0:
			out := p.exited
			p.exited = nil
			p.mu.Unlock()
			return out, nil
		}
		p.mu.Unlock()
		select {
		case <-p.notify:
		case <-p.done:
		}
	}
}

func (p *handlePoller) interrupt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.interrupted {
		p.interrupted = true
		close(p.done)
	}
}

func (p *handlePoller) close() {
	p.mu.Lock()
	for token, w := range p.watches {
		delete(p.watches, token)
		windows.SetEvent(w.cancel)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
