package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"templatefs/internal/control"
	"templatefs/internal/fleet"
	"templatefs/internal/metrics"
	"templatefs/leasefs"
	"templatefs/store"
)

// Backends `templatefs mount --backend` accepts.
const (
	backendGoFuse  = "go-fuse" // Linux default: kernel FUSE through go-fuse (package fs)
	backendCgofuse = "cgofuse" // WinFsp on Windows (the only one there), libfuse3 on Linux with -tags fuse3
)

// mountConfig is what `templatefs mount` was asked for.
type mountConfig struct {
	backend       string
	allowOther    bool
	debug         bool
	noPassthrough bool
	fleetEtcd     string // etcd client URLs, comma-separated; noFleet when the host is in no fleet
	fleetPrefix   string
	metricsListen string // --metrics-listen ADDR, "" for none
	// metrics is the daemon's registry, which the backend feeds with its
	// requests; nil for none.
	metrics *metrics.Metrics
}

func runMount(fl *flag.FlagSet, args []string, stdout io.Writer) error {
	var cfg mountConfig
	fl.StringVar(&cfg.backend, "backend", defaultBackend, "FUSE `BACKEND`: go-fuse (Linux) or cgofuse (Windows; Linux in a binary built with -tags fuse3)")
	fl.BoolVar(&cfg.allowOther, "allow-other", false, "let other users read the mount (FUSE allow_other; as non-root, needs user_allow_other in /etc/fuse.conf)")
	fl.BoolVar(&cfg.debug, "debug", false, "log every FUSE request and reply")
	fl.BoolVar(&cfg.noPassthrough, "no-passthrough", false, "serve payload reads through the daemon instead of FUSE passthrough (go-fuse)")
	fl.StringVar(&cfg.fleetEtcd, "fleet-etcd", noFleet, "join the fleet whose etcd answers at these client `URLS` (comma-separated): tombstones and lifts become fleet-wide (docs/fleet.md)")
	fl.StringVar(&cfg.fleetPrefix, "fleet-prefix", fleet.DefaultPrefix, "the fleet's etcd key `PREFIX` (with --fleet-etcd)")
	fl.StringVar(&cfg.metricsListen, "metrics-listen", "", "also serve MNT/metrics (Prometheus text) over HTTP: GET http://`ADDR`/metrics, ADDR being host:port such as 127.0.0.1:9470 (port 0: a free one, logged); anyone who can reach it can read it")
	pos, err := parseFlags(fl, args)
	if err != nil {
		return err
	}
	if cfg.backend != backendGoFuse && cfg.backend != backendCgofuse {
		return usagef("--backend %q: want %s or %s", cfg.backend, backendGoFuse, backendCgofuse)
	}
	if err := checkFleetFlags(fl, cfg.fleetEtcd, cfg.fleetPrefix); err != nil {
		return err
	}
	if superviseUnderSystemd() {
		return supervise()
	}
	cfg.metrics = metrics.New()
	st, err := openForMount(pos[0], store.Options{Fleet: cfg.fleetEtcd != noFleet, Observer: cfg.metrics})
	if err != nil {
		return err
	}
	d := &daemon{st: st}
	defer d.release()
	if err := checkMountpoint(pos[1], st.Dir()); err != nil {
		return err
	}
	lopts := leasefs.Options{Observer: cfg.metrics, Metrics: cfg.metrics.Render}
	if cfg.fleetEtcd != noFleet {
		m, stop, err := joinFleet(st, cfg.fleetEtcd, cfg.fleetPrefix)
		if err != nil {
			return err
		}
		d.OnStop("the fleet session", stop) // registered first: it stops last
		lopts.StoreLines = fleetLines(m)
		if err := registerFleetMetrics(cfg.metrics, m); err != nil {
			return err
		}
	}
	if d.lfs, err = leasefs.New(st, lopts); err != nil {
		return err
	}
	// Services that take operations on the store start here and register
	// their stop with d.OnStop (stops run latest first: the control socket
	// stops taking commands before exit tracking ends).
	d.OnStop("exit tracking", st.TrackExits()) // leases follow their processes (store/exits.go)
	stopCounting, err := countStates(cfg.metrics, st)
	if err != nil {
		return err
	}
	d.OnStop("the count of leases by state", stopCounting)
	stopControl, err := startControl(st, &d.told) // commands on the store run through this daemon until stopControl
	if err != nil {
		return err
	}
	d.OnStop("control operations in flight", stopControl)
	if cfg.metricsListen != "" {
		stopMetrics, err := listenMetrics(cfg.metricsListen, cfg.metrics)
		if err != nil {
			return err
		}
		d.OnStop("metrics scrapes in flight", stopMetrics)
	}
	return serve(d, pos[1], cfg, func() {
		fmt.Fprintf(stdout, "mounted %s at %s\n", pos[0], pos[1])
	})
}

// noFleet is --fleet-etcd's default: the host is in no fleet.
const noFleet = "none"

// takeoverWait bounds how long mount waits for the store's lock, and
// liveWait how long it waits while a daemon answers on the store's
// control socket: a daemon that got SIGTERM stops serving the socket
// within moments and releases the lock a moment later, so `kill -TERM
// OLD; templatefs mount STORE MNT` takes over at once, while a second
// mount of a store a live daemon serves is refused after liveWait.
const (
	takeoverWait = 10 * time.Second
	liveWait     = time.Second
)

// openForMount opens the store in dir with opts for a daemon, waiting while the
// store is in use (takeoverWait, liveWait) for a stopping daemon or a
// command to let it go.
func openForMount(dir string, opts store.Options) (*store.Store, error) {
	start := time.Now()
	var served time.Time // since when a daemon has answered, continuously
	for {
		st, err := store.Open(dir, opts)
		if !errors.Is(err, store.ErrStoreInUse) {
			return st, err
		}
		now := time.Now()
		switch {
		case !control.Serving(dir):
			served = time.Time{}
		case served.IsZero():
			served = now
		case now.Sub(served) > liveWait:
			return nil, err
		}
		if now.Sub(start) > takeoverWait {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// daemon is one serving `templatefs mount`: its store, the namespace over
// it, and what must stop before the store closes.
type daemon struct {
	st    *store.Store
	lfs   *leasefs.FS // nil until made
	stops []namedStop

	once sync.Once // release runs once
	err  error     // release's result

	mu      sync.Mutex
	pending []string // what release still waits for, while it runs

	told told // set by the go-fuse mount
}

// told runs the control channel's operations so that the kernel's caches
// of the mount have learned of their changes when the client gets its
// reply (fs.Coherence.Do on go-fuse, set once mounted). Unset, it runs
// them as they are: nothing is mounted, or the backend caches nothing it
// is not told of otherwise.
type told struct {
	do atomic.Pointer[func(run func() error) error]
}

// run runs op as the mount's backend wants it run.
func (t *told) run(op func() error) error {
	if do := t.do.Load(); do != nil {
		return (*do)(op)
	}
	return op()
}

// namedStop is a stop registered with OnStop, named for the log.
type namedStop struct {
	name string
	stop func()
}

// detachStep and closeStep name release's last two steps: the wait in
// leasefs.FS.Detach, and store.Close.
const (
	detachStep = "file system calls in flight"
	closeStep  = "the store to close"
)

// OnStop registers stop to run when the daemon stops taking operations:
// at the first SIGINT or SIGTERM, or when runMount returns. stop must
// return only once it no longer touches the store (it may wait for the
// operation in flight): the store is closed right after. Stops run in the
// reverse order of registration, before leasefs is detached. name says
// what a stop that has not returned yet is waiting for ("control
// operations in flight"): a further signal logs it (pending).
func (d *daemon) OnStop(name string, stop func()) {
	d.stops = append(d.stops, namedStop{name, stop})
}

// release stops the daemon touching its store and closes it, once: the
// registered stops, then leasefs.FS.Detach (the mount's entry points fail
// with ENOTCONN from then on; open payload files keep reading), then
// store.Close, which drops the index and the lock, so a new daemon can
// open the store. serve calls it right after detaching the mount; a
// later call does nothing and returns the first one's result: the
// store's close error (logged).
func (d *daemon) release() error {
	d.once.Do(func() {
		steps := make([]string, 0, len(d.stops)+1)
		for i := len(d.stops) - 1; i >= 0; i-- {
			steps = append(steps, d.stops[i].name)
		}
		steps = append(steps, detachStep)
		for i := len(d.stops) - 1; i >= 0; i-- {
			d.setPending(steps)
			d.stops[i].stop()
			steps = steps[1:]
		}
		d.setPending(steps)
		if d.lfs != nil {
			d.lfs.Detach()
		}
		d.setPending([]string{closeStep})
		if d.err = d.st.Close(); d.err != nil {
			slog.Error("close store", "store", d.st.Dir(), "err", d.err)
		}
		d.setPending(nil)
	})
	return d.err
}

func (d *daemon) setPending(steps []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending = steps
}

// waitingFor names what a running release still waits for, in its order:
// the stops not returned yet, then the file system calls in flight, then
// the store's close; none before release starts or after it returned.
func (d *daemon) waitingFor() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.pending)
}

// checkMountpoint refuses a mountpoint inside the store (the mount would
// hide the store from itself), then applies the platform's own checks
// (checkMountpointDir).
func checkMountpoint(mnt, storeDir string) error {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real // store.Open resolved storeDir's links too (a dead mount does not resolve)
	}
	if rel, err := filepath.Rel(storeDir, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("mountpoint %s is inside the store %s: choose a directory outside it", mnt, storeDir)
	}
	return checkMountpointDir(abs)
}

// demoMemory is the logical size of each demo capture's memory.bin.
const demoMemory = 256 << 20

func runDemo(fl *flag.FlagSet, args []string, stdout io.Writer) error {
	if _, err := parseFlags(fl, args); err != nil {
		return err
	}
	top, err := os.MkdirTemp("", "templatefs-demo-")
	if err != nil {
		return err
	}
	storeDir, mnt := filepath.Join(top, "store"), filepath.Join(top, "mnt")
	if err := store.Init(storeDir); err != nil {
		return err
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return err
	}
	st, err := store.Open(storeDir, store.Options{})
	if err != nil {
		return err
	}
	d := &daemon{st: st}
	defer d.release()
	var gens []store.Generation
	for seed := uint64(1); seed <= 2; seed++ {
		out := filepath.Join(top, fmt.Sprintf("sample%d", seed))
		if err := writeSample(out, 6, demoMemory, seed); err != nil {
			return err
		}
		class, err := readClass(filepath.Join(out, "class.json"))
		if err != nil {
			return err
		}
		g, err := st.Publish(filepath.Join(out, "capture"), class)
		if err != nil {
			return err
		}
		gens = append(gens, g)
	}
	if d.lfs, err = leasefs.New(st, leasefs.Options{}); err != nil {
		return err
	}
	return serve(d, mnt, mountConfig{backend: defaultBackend}, func() {
		g := gens[0].ID
		fmt.Fprintf(stdout, `templatefs demo: a store with two generations of one key, mounted.

  store:      %[1]s
  mountpoint: %[2]s
  captures:   %[3]s/sample1/capture, %[3]s/sample2/capture

Try, in another terminal:
  ls %[2]s/generations %[2]s/keys/*
  cat %[2]s/store %[2]s/keys/*/generations
  cat %[2]s/generations/%[4]s/status %[2]s/generations/%[4]s/manifest
  ls -ls %[2]s/generations/%[4]s/payload              # memory.bin is sparse
  cmp %[3]s/sample1/capture/memory.bin %[2]s/generations/%[4]s/payload/memory.bin
  touch %[2]s/generations/%[4]s/leases/clone-1        # acquire a lease
  cat %[2]s/leases/clone-1
  mv %[2]s/generations/%[4]s %[2]s/tombstones/        # tombstone it
  touch %[2]s/tombstones/%[4]s/leases/clone-2         # refused: Operation not permitted

Press Ctrl-C to unmount. Remove everything afterwards with: rm -rf %[3]s
`, storeDir, mnt, top, g)
	})
}
