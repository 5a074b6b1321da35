package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"templatefs/internal/control"
	"templatefs/store"
)

// storeOp is the work of a command on an open store (publish, push,
// pull, fsck, verify, settings, fleet): the same code whether the command opens the store
// itself or hands the operation to the daemon that has the store open
// (templatefs mount), which runs it with its own store, in its own
// transactions (serveControl).
type storeOp struct {
	dir  string        // the STORE argument, as given: messages name it so
	open store.Options // how the command opens the store itself
	// args is the command line again, for the daemon to parse with the
	// same prepare: the flags given, "--", the arguments, every path in
	// them absolute (the daemon has another working directory).
	args []string
	run  func(st *store.Store, out opOutput) error
	// openFailed, if not nil, sees the error of the command's own open
	// before it is reported (fsck prints a damaged index as a problem).
	openFailed func(stdout io.Writer, err error) error
}

// opOutput is where an operation writes: its standard output, and the
// progress of its long steps.
type opOutput struct {
	stdout io.Writer
	// progress returns where a step named label ("copy", "hash")
	// reports its bytes done; nil when nobody watches.
	progress func(label string) store.Progress
	// online is set when the daemon runs the operation for a client.
	online bool
}

// commandLine is the command line the daemon parses for an operation:
// the flags fl was given, each as --name=value, then "--" and pos.
func commandLine(fl *flag.FlagSet, pos ...string) []string {
	var args []string
	fl.Visit(func(f *flag.Flag) { args = append(args, "--"+f.Name+"="+f.Value.String()) })
	return append(append(args, "--"), pos...)
}

// absPath is path made absolute, for an operation the daemon may run.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// runStore runs a command that works on an open store: it parses the
// command line (cmd.prepare), opens the store and runs the operation.
// When a daemon has the store open (store.ErrStoreInUse) it hands the
// operation to that daemon over the store's control socket instead and
// relays its output and exit status, so the command behaves the same
// whether the store is mounted or not.
func runStore(cmd command, fl *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	op, err := cmd.prepare(fl, args)
	if err != nil {
		return exitStatus(cmd, fl, err, stdout, stderr)
	}
	view := newProgressView(stderr)
	defer view.finish()
	st, err := store.Open(op.dir, op.open)
	if errors.Is(err, store.ErrStoreInUse) {
		return handOver(cmd, op, err, view, stdout, stderr)
	}
	if err != nil {
		if op.openFailed != nil {
			err = op.openFailed(stdout, err)
		}
		return exitStatus(cmd, fl, err, stdout, stderr)
	}
	err = op.run(st, opOutput{stdout: stdout, progress: view.step})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return exitStatus(cmd, fl, err, stdout, stderr)
}

// handOver runs op on the daemon serving its store and returns the exit
// status the daemon reports. inUse is the error of the command's own
// open; when no daemon answers, the command fails with it and the
// reason.
func handOver(cmd command, op storeOp, inUse error, view *progressView, stdout, stderr io.Writer) int {
	req := control.Request{Command: cmd.name, Args: op.args, Progress: view != nil}
	code, err := control.Call(op.dir, req, stdout, stderr, func(p control.Progress) {
		view.update(p.Label, p.Done, p.Total)
	})
	switch {
	case errors.Is(err, control.ErrUnsupported): // Windows: the store's lock is all there is
		fmt.Fprintf(stderr, "templatefs %s: %v\n", cmd.name, inUse)
		return 1
	case errors.Is(err, control.ErrNoDaemon):
		fmt.Fprintf(stderr, "templatefs %s: %v; and no daemon serves it (%v): if a templatefs mount of it is starting, run the command again once it has mounted; if it is another command, run this one when that one has finished\n", cmd.name, inUse, err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "templatefs %s: %v\n", cmd.name, err)
		return 1
	}
	return code
}

// startControl serves the control socket of st, the store a daemon has
// open, so that the commands with a storeOp (daemonCommands) work while
// it is mounted: each operation a command hands over runs on st with the code
// the command runs offline (serveControl). It returns stop, which stops
// taking new operations (the socket is closed and removed), ends the long
// step of any operation in flight (store.Interrupt: a publication's copy,
// a digest check; its client is told ErrInterrupted and nothing it had
// not committed stays) and waits for those operations to return; call it
// before st is closed. It may be called more than once. Where the
// control channel is not supported (Windows) stop does nothing and
// commands refuse while the store is mounted, as before.
func startControl(st *store.Store, t *told) (stop func(), err error) {
	srv, err := control.Listen(st.Dir(), st.OwnerUID(), serveControl(st, t), slog.Default())
	if errors.Is(err, control.ErrUnsupported) {
		slog.Info("control channel not supported here: commands on this store wait until it is unmounted", "reason", err)
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	slog.Info("control socket ready: "+strings.Join(daemonCommands(), ", ")+" run through this daemon", "socket", control.SocketPath(st.Dir()))
	return func() { st.Interrupt(); srv.Stop() }, nil
}

// serveControl returns the handler of st's control socket: it parses the
// request's command line with the command's own prepare and runs the
// operation on st, reporting as the command does (exitStatus).
func serveControl(st *store.Store, t *told) control.Handler {
	return func(req control.Request, w *control.Writer) (int, error) {
		cmd, ok := lookup(req.Command)
		if !ok || cmd.prepare == nil {
			return 0, fmt.Errorf("unknown command %q: the daemon runs %s", req.Command, strings.Join(daemonCommands(), ", "))
		}
		fl := newFlagSet(cmd)
		stdout, stderr := w.Stdout(), w.Stderr()
		op, err := cmd.prepare(fl, req.Args)
		if err == nil {
			err = sameStore(op.dir, st.Dir())
		}
		if err == nil {
			out := opOutput{stdout: stdout, online: true, progress: func(label string) store.Progress {
				if !w.WantsProgress() {
					return nil
				}
				return func(done, total int64) { w.Progress(label, done, total) }
			}}
			err = t.run(func() error { return op.run(st, out) })
		}
		return exitStatus(cmd, fl, err, stdout, stderr), nil
	}
}

// sameStore refuses an operation on dir unless dir is served, the store
// the daemon has open (served is absolute and has no symbolic links): the
// CLI always hands an operation to its own store's daemon, so another
// STORE in a request is a client's mistake, refused changing nothing.
func sameStore(dir, served string) error {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil || abs != served {
		return fmt.Errorf("this daemon serves the store %s, not %s", served, dir)
	}
	return nil
}

// daemonCommands are the commands a daemon runs for a client.
func daemonCommands() []string {
	var names []string
	for _, c := range commands {
		if c.prepare != nil {
			names = append(names, c.name)
		}
	}
	return names
}
