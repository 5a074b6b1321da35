//go:build linux

package concurrency

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"templatefs/store"
)

// exitBound bounds OpExit's wait for the daemon to record an exit and
// finish a retirement it drained, and an opener's report: generous, it
// only catches hangs (2 noisy cores, -race).
const exitBound = time.Minute

// leaseInfo is what a client read of a lease it created: the lease's
// sequence number and launch ID, and its generation.
type leaseInfo struct {
	Seq    uint64 `json:"seq"`
	Launch string `json:"launch_id"`
	gen    store.GenerationID
}

// leases are the last lease created of each clone ID, as its creator read it.
type leases struct {
	mu sync.Mutex
	m  map[string]leaseInfo
}

func (o *leases) created(clone string, l leaseInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[clone] = l
}

// get returns the last lease created of clone, if any.
func (o *leases) get(clone string) (leaseInfo, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.m[clone]
	return l, ok
}

// acquire is OpAcquire: an exclusive create, read back for the lease's
// sequence number and launch ID.
func (e *env) acquire(in Input, path string) Output {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return Output{Result: mountResult(err)}
	}
	data, rerr := io.ReadAll(f)
	cerr := f.Close()
	var l leaseInfo
	switch {
	case rerr != nil:
		return Output{Result: "error: read the created lease: " + rerr.Error()}
	case cerr != nil:
		return Output{Result: mountResult(cerr)}
	case json.Unmarshal(data, &l) != nil || l.Seq == 0:
		return Output{Result: fmt.Sprintf("error: created lease reads %q", data)}
	}
	l.gen = in.Gen
	e.leases.created(in.Clone, l)
	return Output{Result: ResultOK, Seq: l.Seq}
}

// proc is a live process a client started by OpSpawn, or for an OpBind
// by "pid N" that succeeded.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // the opener's stdin (nil for sleep): a line makes it open, its end makes it exit
	report *bufio.Reader  // the opener's stdout: the result of its open
	group  int
	owner  int // the client that started it, and ends it by OpExit
	clone  string
}

// procs are the live processes, by Input.Proc.
type procs struct {
	mu   sync.Mutex
	last int
	m    map[int]*proc
}

// number returns a new process number, never reused.
func (ps *procs) number() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.last++
	return ps.last
}

func (ps *procs) add(n int, p *proc) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.m[n] = p
}

func (ps *procs) get(n int) *proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.m[n]
}

func (ps *procs) take(n int) *proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.m[n]
	delete(ps.m, n)
	return p
}

// ownedBy returns the numbers of client's live processes, oldest first.
func (ps *procs) ownedBy(client int) []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []int
	for n, p := range ps.m {
		if p.owner == client {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// killAll kills and reaps every live process.
func (ps *procs) killAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for n, p := range ps.m {
		p.end()
		delete(ps.m, n)
	}
}

// end kills the process with SIGKILL and reaps it.
func (p *proc) end() {
	p.cmd.Process.Kill()
	if p.stdin != nil {
		p.stdin.Close()
	}
	p.cmd.Wait()
}

// spawn is OpSpawn as client: it starts this test binary as an opener
// (main_test.go) of <dir>/<gen>/payload/state.bin with in's launch ID in
// its environment. exec.Cmd.Start returns once the new program runs, so
// /proc shows its environment by then.
func (e *env) spawn(client int, in Input, payload string) Output {
	self, err := os.Executable()
	if err != nil {
		return Output{Result: "error: " + err.Error()}
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", envOpen+"="+payload, store.LaunchEnv+"="+in.Launch)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return Output{Result: "error: " + err.Error()}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Output{Result: "error: " + err.Error()}
	}
	if err := cmd.Start(); err != nil {
		return Output{Result: "error: " + err.Error()}
	}
	e.procs.add(in.Proc, &proc{cmd: cmd, stdin: stdin, report: bufio.NewReader(stdout), group: in.Group, owner: client, clone: in.Clone})
	return Output{Result: ResultOK}
}

// bind is OpBind as client: the opener OpSpawn started opens its payload
// and reports the result, or with Input.ByPID, `sh -c 'exec sleep 1000'`
// starts and "pid N" is written to leases/<clone>. A process whose bind
// failed is killed and reaped before bind returns.
func (e *env) bind(client int, in Input) Output {
	p := e.procs.get(in.Proc)
	if in.ByPID {
		cmd := exec.Command("sh", "-c", "exec sleep 1000")
		if err := cmd.Start(); err != nil {
			return Output{Result: "error: " + err.Error()}
		}
		p = &proc{cmd: cmd, group: in.Group, owner: client, clone: in.Clone}
	} else if p == nil {
		return Output{Result: fmt.Sprintf("error: no process %d spawned", in.Proc)}
	}
	hang := time.AfterFunc(exitBound, func() { p.cmd.Process.Kill() })
	defer hang.Stop()
	var result string
	if in.ByPID {
		result = mountResult(writeFile(e.path("leases", in.Clone), fmt.Sprintf("pid %d\n", p.cmd.Process.Pid)))
	} else if _, err := io.WriteString(p.stdin, "open\n"); err != nil {
		result = fmt.Sprintf("error: tell the opener to open: %v", err)
	} else if line, err := p.report.ReadString('\n'); err != nil {
		result = fmt.Sprintf("error: opener's report %q: %v", line, err)
		if e.procs.take(in.Proc); p.cmd.Wait() != nil && p.cmd.ProcessState.String() == "signal: killed" && hang.Stop() {
			return Output{Result: ResultKilled} // the daemon's kill of the lease its open bound
		}
	} else {
		result = strings.TrimSpace(line)
	}
	if result != ResultOK {
		e.procs.take(in.Proc)
		p.end()
		return Output{Result: result}
	}
	e.procs.add(in.Proc, p)
	return Output{Result: ResultOK}
}

// exit is OpExit: SIGKILL of process in.Proc from the test, then, if a
// lease of its clone is bound to it, the wait (exitBound) until the
// daemon has recorded that lease exited, and until a retiring generation
// whose leases have then all exited is gone: the whole transition the
// model takes as OpExit's.
func (e *env) exit(in Input) Output {
	p := e.procs.take(in.Proc)
	if p == nil {
		return Output{Result: fmt.Sprintf("error: no live process %d", in.Proc)}
	}
	pid := p.cmd.Process.Pid
	p.end()
	deadline := time.Now().Add(exitBound)
	for {
		l, err := readLease(e.path("leases", p.clone))
		switch {
		case errors.Is(err, fs.ErrNotExist), err == nil && (l.Process == nil || l.Process.PID != pid):
			return Output{Result: ResultOK} // bound nothing, or released since
		case err == nil && l.State == store.Exited:
			if err := e.awaitDrain(l.Generation, deadline); err != nil {
				return Output{Result: "error: " + err.Error()}
			}
			return Output{Result: ResultOK}
		}
		if time.Now().After(deadline) {
			return Output{Result: fmt.Sprintf("error: lease %s of killed pid %d not exited within %v: %+v, %v", p.clone, pid, exitBound, l, err)}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitDrain waits (until deadline) for retiring/<gen> to be gone if
// every lease it lists has exited: the daemon deletes it after recording
// the last exit. A lease that has not exited keeps it, and then an exit
// later (OpExit), a release or a cancel drains it.
func (e *env) awaitDrain(gen store.GenerationID, deadline time.Time) error {
	dir := e.path("retiring", gen.String())
	for {
		entries, err := os.ReadDir(filepath.Join(dir, "leases"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		for _, d := range entries {
			if l, err := readLease(filepath.Join(dir, "leases", d.Name())); err == nil && l.State != store.Exited {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("retiring/%s still there %v after the exit of its last lease", gen, exitBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readLease reads and decodes the lease file at path.
func readLease(path string) (store.Lease, error) {
	var l store.Lease
	data, err := os.ReadFile(path)
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return l, fmt.Errorf("%s reads %q: %w", path, data, err)
	}
	return l, nil
}
