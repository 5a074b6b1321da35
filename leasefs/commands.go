package leasefs

import (
	"bytes"
	"fmt"
	"sync"

	"templatefs/store"
)

// Commands is the command stream of one open handle of a lease or ctl
// file (Handle.Commands): a command is one line. The bytes of the
// handle's writes are one stream, in the order the writes arrive,
// whatever their file offsets: a ctl file is not storage, so `echo`
// (offset 0 at each open), `>>` (O_APPEND, offset at the file's size) and
// a pwrite(2) anywhere all just add to the stream. Each complete line
// runs once, when the write holding its newline arrives; empty lines are
// skipped (`printf 'tombstone\n\n'`); a partial line waits for the
// write with its newline, or runs at close (Flush) if none comes.
//
// The commands:
//
//   - lease file, `pid N`: store.BindLeaseSeq binds the lease to process N;
//   - lease file, `kill`: store.KillLeaseSeq sends SIGKILL through a pidfd,
//     waits up to Options.KillWait, then releases the lease (a reserved
//     lease has no process: refused, store.ErrLeaseReserved);
//   - lease file, `cancel`: store.CancelLeaseSeq ends a reserved lease,
//     the only way one ends, refused while a process carries its launch
//     ID (store.ErrLaunchInUse); the lease file is gone afterwards;
//   - ctl file, `tombstone`, `lift`, `retire`: store.Tombstone, store.Lift,
//     store.Retire on the file's generation, recording the writer's uid.
//     Each is idempotent: tombstoning a tombstoned or retiring generation,
//     lifting a published one or retiring a retiring one succeeds
//     unchanged.
//
// A lease command acts on the lease the handle was opened on (by its
// sequence number), never on a newer lease of the same clone ID. A
// Commands is safe for concurrent use; writes are applied one at a time.
type Commands struct {
	f *FS
	n Node

	// run is held while commands run, so they run one at a time, in
	// order. A Flush with nothing pending does not take it: a process
	// that inherited the descriptor closes it when it execs (close on
	// exec) while holding its exec lock, and a cancel or bind running
	// here may be reading that process's /proc environment, which waits
	// for the exec: waiting for run there would deadlock.
	run     sync.Mutex
	mu      sync.Mutex // guards pending and writer
	pending []byte     // a partial line: no newline yet
	writer  Caller     // who wrote pending

	// created is set on the handle of a create that reserved its lease:
	// the handle's writes and closes wait for the lease's commit.
	created *createdLease
}

// createdLease is the lease a create reserved (FS.Create), as its
// creating handle knows it.
type createdLease struct {
	res   *store.Reservation
	dir   Node // the leases directory it was created in
	attr  Attr // its attributes as created
	noted sync.Once
}

// awaitCreated waits for the commit of the lease the handle's create
// reserved, if any, and returns its error (store.Reservation.Wait),
// naming the create; a refusal is remembered as the generation's last
// refusal, once, by the first close that sees it.
func (w *Commands) awaitCreated() error {
	cl := w.created
	if cl == nil {
		return nil
	}
	err := cl.res.Wait()
	if err == nil {
		return nil
	}
	err = fmt.Errorf("create lease %q in %s: %w", w.n.name, cl.dir, err)
	cl.noted.Do(func() { w.f.refusals.note(cl.dir.Generation(), "create "+w.n.name, err) })
	return err
}

// commands returns the command stream of a new open of writable node n.
func (f *FS) commands(n Node) *Commands { return &Commands{f: f, n: n} }

// Write adds data, written by c, to the stream and runs each line it
// completes, in order, each durably before the next. It returns len(data)
// once they have all taken effect. The first refused command ends the
// write with its error: the lines after it in data are dropped, and the
// commands before it have acted. A partial line longer than
// MaxCommandLen is refused at once (ErrBadWrite) and dropped.
//
// Errors: ErrAccess (checked at every write, before anything runs),
// ErrBadWrite, store.ErrNotFound when the lease or generation is gone,
// BindLease's store.ErrLeaseBound, store.ErrNoProcess, store.ErrTombstoned,
// store.ErrRetiring, store.ErrIneligible, CancelLease's
// store.ErrLaunchInUse, KillLease's store.ErrLeaseReserved,
// store.ErrProcessUninspectable, KillLease's store.ErrTeardownFailed and
// ReleaseLease's errors, Lift's store.ErrRetiring, Retire's
// store.ErrNotTombstoned. A refusal is remembered as the generation's last
// refusal.
func (w *Commands) Write(data []byte, c Caller) (int, error) {
	if err := w.awaitCreated(); err != nil {
		return 0, err
	}
	w.run.Lock()
	defer w.run.Unlock()
	if err := w.f.enter("write " + w.n.String()); err != nil {
		return 0, err
	}
	defer w.f.leave()
	if err := w.f.authorize(c, "write "+w.n.String()); err != nil {
		w.f.refusals.note(w.f.writeGeneration(w.n), w.f.writeOp(w.n), err)
		return 0, err
	}
	w.mu.Lock()
	stream := append(w.pending, data...)
	w.pending, w.writer = nil, c
	w.mu.Unlock()
	for {
		line, rest, complete := bytes.Cut(stream, []byte{'\n'})
		if !complete {
			break
		}
		stream = rest
		if len(line) == 0 {
			continue
		}
		if err := w.f.command(w.n, line, c); err != nil {
			return 0, err
		}
	}
	if len(stream) > MaxCommandLen {
		return 0, w.f.command(w.n, stream, c) // refused by its length, unparsed
	}
	w.mu.Lock()
	w.pending = bytes.Clone(stream)
	w.mu.Unlock()
	return len(data), nil
}

// Flush runs the partial line left by the writes so far, if any, as a
// command of its last writer: a final command written without a newline
// runs at close. Adapters call it from FLUSH (each close(2) of the
// handle, whose error close returns) and from RELEASE. On the handle of a
// create that reserved a new lease (FS.Create), Flush first waits for
// that lease's commit and returns its error, at every close: the close is
// where the create is acknowledged. It returns the command's error, as
// Write; with nothing pending (and no lease commit to wait for) it
// returns nil at once, even while a write's commands run (a partial line
// that write leaves runs at the next Flush).
func (w *Commands) Flush() error {
	if err := w.awaitCreated(); err != nil {
		return err
	}
	w.mu.Lock()
	line, c := w.pending, w.writer
	w.pending = nil
	w.mu.Unlock()
	if len(line) == 0 {
		return nil
	}
	w.run.Lock()
	defer w.run.Unlock()
	return w.f.command(w.n, line, c)
}

// command runs one command line (no newline) of writable node n for c,
// who has been authorized.
func (f *FS) command(n Node, line []byte, c Caller) (err error) {
	op := f.writeOp(n)
	if err := f.enter(op); err != nil {
		return err // nothing to note: the generation's status is the store's
	}
	defer f.leave()
	defer func() { f.refusals.note(f.writeGeneration(n), op, err) }()
	switch n.kind {
	case KindLeaseFile:
		return f.leaseCommand(n, line)
	case KindCtlFile:
		return f.ctlCommand(n, line, c, &op)
	case KindIncomingCtlFile:
		return f.incomingCommand(n, line)
	}
	return fmt.Errorf("write %s: %w", n, ErrReadOnly)
}

// writeGeneration is the generation whose status shows a refused write to
// n: a ctl file's, or the generation of a lease file's lease (0 when the
// lease is gone).
func (f *FS) writeGeneration(n Node) store.GenerationID {
	if n.kind != KindLeaseFile {
		return n.Generation()
	}
	if l, err := f.lease(n); err == nil {
		return l.Generation
	}
	return 0
}

// writeOp names a write to n in status' last_refusal.
func (f *FS) writeOp(n Node) string {
	if n.kind == KindLeaseFile {
		return "write lease " + n.name
	}
	return "write ctl"
}

func (f *FS) leaseCommand(n Node, line []byte) error {
	if _, err := f.lease(n); err != nil {
		return err
	}
	cmd, err := parseLeaseWrite(line)
	if err != nil {
		return fmt.Errorf("write %s: %w", n, err)
	}
	// By sequence number: a stale handle must not reach a newer lease of
	// the same clone ID.
	switch {
	case cmd.kill:
		return f.st.KillLeaseSeq(n.name, n.num, f.killWait)
	case cmd.cancel:
		return f.st.CancelLeaseSeq(n.name, n.num)
	}
	_, err = f.st.BindLeaseSeq(n.name, n.num, cmd.pid)
	return err
}

// ctlCommand runs one ctl command line; a parsed command renames *op
// to "ctl <command>" for status' last_refusal.
func (f *FS) ctlCommand(n Node, line []byte, c Caller, op *string) error {
	gen := n.Generation()
	cmd, err := parseCtlWrite(line)
	if err != nil {
		return fmt.Errorf("write %s: %w", n, err)
	}
	*op = "ctl " + string(cmd)
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
