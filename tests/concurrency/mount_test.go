//go:build linux

package concurrency

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"golang.org/x/sys/unix"

	"templatefs/internal/capturetest"
	"templatefs/internal/sample"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/tests/harness"
)

// Knobs, read from the environment.
const (
	envDuration     = "TEMPLATEFS_CONCURRENCY_DURATION"      // how long clients run; Go duration, default 3s
	envClients      = "TEMPLATEFS_CONCURRENCY_CLIENTS"       // concurrent clients, default 8
	envSeed         = "TEMPLATEFS_CONCURRENCY_SEED"          // seed of the clients' choices; default from the clock, logged
	envCheckTimeout = "TEMPLATEFS_CONCURRENCY_CHECK_TIMEOUT" // porcupine's budget; Go duration, default 2m
	// and harness.RequireFUSEEnv: "1" fails instead of skipping without FUSE
)

const (
	groups         = 2 // lease groups: see the package doc
	clonesPerGroup = 4 // few clone IDs, so creates conflict
	maxLive        = 3 // a group publishes while fewer of its generations are not known to be retiring
	maxOvertime    = 4 // clients run at most this many times the duration to reach every coverage outcome
)

// The eligible capture is one second old on this boot's monotonic clock,
// the ineligible one an hour in its future (newEnv).
const ineligibleAhead = time.Hour

func envDurationOr(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", name, v)
	}
	return d
}

func envIntOr(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// mountResult names the result of a system call on the mount: ResultOK,
// the errno's name ("ENOENT"), or "error: " and the text of an error that
// carries no errno.
func mountResult(err error) string {
	if err == nil {
		return ResultOK
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	return "error: " + err.Error()
}

// tracker is what clients know of each group's generations, to aim their
// operations; it plays no part in the check.
type tracker struct {
	mu       sync.Mutex
	gens     [groups][]store.GenerationID // publication order
	retiring map[store.GenerationID]bool  // a retire returned OK
}

func (tr *tracker) published(group int, gen store.GenerationID) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.gens[group] = append(tr.gens[group], gen)
}

func (tr *tracker) isRetiring(gen store.GenerationID) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.retiring[gen]
}

func (tr *tracker) retire(gen store.GenerationID) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.retiring[gen] = true
}

// pick returns a generation of group, whether it is known to be retiring,
// and how many of the group's generations are not. It picks mostly among
// those, else among the last few retiring ones (which stay while leased),
// else among the last few of all.
func (tr *tracker) pick(group int, rng *rand.Rand) (gen store.GenerationID, retiring bool, live int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	all := tr.gens[group]
	var lives, retirings []store.GenerationID
	for _, g := range all {
		if tr.retiring[g] {
			retirings = append(retirings, g)
		} else {
			lives = append(lives, g)
		}
	}
	retirings = retirings[max(0, len(retirings)-3):]
	switch n := rng.IntN(100); {
	case n < 65 && len(lives) > 0:
		gen = lives[rng.IntN(len(lives))]
	case n < 90 && len(retirings) > 0:
		gen = retirings[rng.IntN(len(retirings))]
	default:
		recent := all[max(0, len(all)-5):]
		gen = recent[rng.IntN(len(recent))]
	}
	return gen, tr.retiring[gen], len(lives)
}

func (tr *tracker) all() map[store.GenerationID]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[store.GenerationID]int{}
	for group, gens := range tr.gens {
		for _, g := range gens {
			out[g] = group
		}
	}
	return out
}

// env is a store served by a real `templatefs mount` daemon in a child
// process (tests/harness), so clients can start processes that bind
// leases while the daemon reads /proc for a cancel.
type env struct {
	t        *testing.T
	store    string
	mnt      string
	class    string // class.json for publish
	daemon   *harness.Daemon
	captures map[bool]string // by eligibility
	rec      *Recorder
	track    *tracker
	leases   *leases // launch_test.go
	procs    *procs  // launch_test.go
}

func newEnv(t *testing.T) *env {
	t.Helper()
	harness.RequireFUSE(t)
	dir := t.TempDir()
	e := &env{t: t, store: filepath.Join(dir, "store"), mnt: filepath.Join(dir, "mnt"), class: filepath.Join(dir, "class.json"),
		captures: map[bool]string{}, rec: NewRecorder(), track: &tracker{retiring: map[store.GenerationID]bool{}},
		leases: &leases{m: map[string]leaseInfo{}}, procs: &procs{m: map[int]*proc{}}}
	harness.Run(t, "init", e.store)
	if err := sample.WriteClass(e.class, manifest.Version6); err != nil {
		t.Fatal(err)
	}
	facts, err := store.ReadHostFacts()
	if err != nil {
		t.Fatal(err)
	}
	for eligible, mono := range map[bool]uint64{true: facts.MonotonicNs - uint64(time.Second), false: facts.MonotonicNs + uint64(ineligibleAhead)} {
		e.captures[eligible] = capturetest.Make(t, dir, manifest.SampleOptions{
			StateSizeBytes: 4096, MemorySizeBytes: 1 << 20, CaptureUTC: facts.UTC, CaptureMonotonicNs: mono,
			HostID: facts.HostID, BootID: facts.BootID, HostClock: facts.HostClock,
		})
	}
	if err := os.Mkdir(e.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	e.daemon = harness.StartMount(t, e.store, e.mnt)
	t.Cleanup(e.procs.killAll) // before the daemon's cleanup: open payloads keep a stopping daemon
	return e
}

func (e *env) path(elems ...string) string {
	return filepath.Join(append([]string{e.mnt}, elems...)...)
}

// do performs one operation as client and records it.
func (e *env) do(client int, in Input) Output {
	return e.rec.Do(client, in, func(in Input) Output { return e.perform(client, in) })
}

// perform executes in as client through the mount (OpPublish: the CLI,
// OpExit: a signal from the test) and reports its result.
func (e *env) perform(client int, in Input) Output {
	gen := e.path(in.Dir.String(), in.Gen.String())
	var err error
	switch {
	case in.Op == OpPublish:
		return e.publish(in)
	case in.Op == OpSpawn:
		return e.spawn(client, in, filepath.Join(gen, "payload", "state.bin"))
	case in.Op == OpBind:
		return e.bind(client, in)
	case in.Op == OpExit:
		return e.exit(in)
	case in.Ctl:
		err = writeFile(filepath.Join(gen, "ctl"), in.Op.String()+"\n")
	case in.Op == OpAcquire:
		return e.acquire(in, filepath.Join(gen, "leases", in.Clone))
	case (in.Op == OpCancel || in.Op == OpKill) && in.Dir == DirLeases:
		err = writeFile(e.path("leases", in.Clone), in.Op.String()+"\n")
	case in.Op == OpCancel || in.Op == OpKill:
		err = writeFile(filepath.Join(gen, "leases", in.Clone), in.Op.String()+"\n")
	case in.Op == OpRelease && in.Dir == DirLeases:
		err = unix.Unlink(e.path("leases", in.Clone))
	case in.Op == OpRelease:
		err = unix.Unlink(filepath.Join(gen, "leases", in.Clone))
	case in.Op == OpTombstone:
		// rename(2) itself: os.Rename refuses an existing target directory.
		err = unix.Rename(gen, e.path("tombstones", in.Gen.String()))
	case in.Op == OpLift:
		err = unix.Rename(gen, e.path("generations", in.Gen.String()))
	case in.Op == OpRetire:
		err = unix.Rmdir(gen)
	case in.Op == OpList, in.Op == OpListLeases:
		p := e.path(in.Dir.String())
		if in.Op == OpListLeases {
			p = filepath.Join(gen, "leases")
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return Output{Result: mountResult(err)}
		}
		out := Output{Result: ResultOK}
		for _, d := range entries {
			out.Names = append(out.Names, d.Name())
		}
		return out
	case in.Op == OpStatus:
		data, err := os.ReadFile(filepath.Join(gen, "status"))
		if err != nil {
			return Output{Result: mountResult(err)}
		}
		return parseStatus(data)
	default:
		return Output{Result: fmt.Sprintf("error: unknown operation %v", in.Op)}
	}
	if err == nil && in.Op == OpRetire {
		e.track.retire(in.Gen)
	}
	return Output{Result: mountResult(err)}
}

// publish is OpPublish: `templatefs publish --duplicate`, which hands the
// publication to the daemon; its last line is the generation ID.
func (e *env) publish(in Input) Output {
	r := harness.RunStatus(e.t, "publish", "--class", e.class, "--duplicate", e.store, e.captures[in.Eligible])
	lines := harness.Lines(r.Stdout)
	if r.Code != 0 || len(lines) == 0 {
		return Output{Result: "error: publish: " + r.String()}
	}
	gen, err := store.ParseGenerationID(lines[len(lines)-1])
	if err != nil {
		return Output{Result: "error: publish: " + err.Error()}
	}
	e.track.published(in.Group, gen)
	return Output{Result: ResultOK, Gen: gen}
}

// writeFile writes data to an existing file in one write(2), as echo does.
func writeFile(path, data string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte(data))
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// parseStatus reads the state and new_leases lines of a status file
// (docs/tree.md).
func parseStatus(data []byte) Output {
	out := Output{Result: ResultOK}
	var seen int
	for _, line := range strings.Split(string(data), "\n") {
		key, value, _ := strings.Cut(line, ": ")
		switch key {
		case "state":
			out.State = store.GenerationState(value)
			seen++
		case "new_leases":
			out.Granted = value == "granted"
			seen++
		}
	}
	if seen != 2 {
		return Output{Result: fmt.Sprintf("error: status without one state and one new_leases line: %q", data)}
	}
	return out
}

// maxProcs is how many live processes a client keeps at most.
const maxProcs = 2

// step makes one random operation of client.
func (e *env) step(client int, rng *rand.Rand) {
	if mine := e.procs.ownedBy(client); len(mine) >= maxProcs || len(mine) > 0 && rng.IntN(8) == 0 {
		p := e.procs.get(mine[0]) // only its owner takes it
		e.do(client, Input{Op: OpExit, Group: p.group, Clone: p.clone, Proc: mine[0]})
		return
	}
	group := rng.IntN(groups)
	gen, retiring, live := e.track.pick(group, rng)
	// Mostly the directory the generation is likely in.
	dirs := []Dir{DirGenerations, DirGenerations, DirTombstones, DirRetiring}
	if retiring {
		dirs = []Dir{DirRetiring, DirRetiring, DirRetiring, DirTombstones}
	}
	in := Input{
		Group: group, Gen: gen,
		Dir:   dirs[rng.IntN(len(dirs))],
		Clone: fmt.Sprintf("k%d-c%d", group, rng.IntN(clonesPerGroup)),
		Ctl:   rng.IntN(4) == 0,
	}
	switch n := rng.IntN(100); {
	case retiring && n < 25:
		// Aim at what only a retiring generation shows: rmdir while
		// leases remain (EBUSY), lift refused (EPERM).
		in.Op, in.Dir, in.Ctl = OpRetire, DirRetiring, false
		if n < 5 {
			in.Op = OpLift
		}
	case live < maxLive && n < 8:
		in = Input{Op: OpPublish, Group: group, Eligible: rng.IntN(5) > 0}
	case n < 26:
		in.Op, in.Ctl = OpAcquire, false
	case n < 32:
		in.Op, in.Dir, in.Ctl = OpRelease, DirLeases, false
	case n < 34:
		in.Op, in.Ctl = OpRelease, false
	case n < 38:
		in.Op, in.Ctl = OpCancel, false
		if rng.IntN(2) == 0 {
			in.Dir = DirLeases
		}
	case n < 40:
		in.Op, in.Dir, in.Ctl = OpKill, DirLeases, false
	case n < 46:
		e.aimBind(&in, rng)
		if !in.ByPID {
			spawn := in
			spawn.Op = OpSpawn
			e.do(client, spawn)
		}
	case n < 54:
		in.Op = OpTombstone
		if !in.Ctl {
			in.Dir = DirGenerations
		}
	case n < 61:
		in.Op = OpLift
		if !in.Ctl && in.Dir == DirGenerations {
			in.Dir = DirTombstones
		}
	case n < 67:
		in.Op = OpRetire
		if !in.Ctl && in.Dir == DirGenerations && rng.IntN(3) > 0 {
			in.Dir = DirTombstones
		}
	case n < 79:
		in = Input{Op: OpList, Group: AllGroups, Dir: []Dir{DirGenerations, DirTombstones, DirRetiring, DirLeases}[rng.IntN(4)]}
	case n < 87:
		in.Op, in.Ctl = OpListLeases, false
	default:
		in.Op, in.Ctl = OpStatus, false
	}
	e.do(client, in)
}

// aimBind makes in an OpBind of its clone: mostly with the launch ID of
// the clone's last created lease, on that lease's generation, else by
// "pid N".
func (e *env) aimBind(in *Input, rng *rand.Rand) {
	in.Op, in.Ctl, in.Proc = OpBind, false, e.procs.number()
	l, ok := e.leases.get(in.Clone)
	if !ok || rng.IntN(3) == 0 {
		in.ByPID, in.Dir = true, DirLeases
		return
	}
	in.Seq, in.Launch = l.Seq, l.Launch
	if rng.IntN(5) > 0 {
		in.Gen, in.Dir = l.gen, DirGenerations
		if e.track.isRetiring(l.gen) {
			in.Dir = DirRetiring
		}
	}
	if in.Dir == DirLeases {
		in.Dir = DirGenerations
	}
}

// finalReads records, after every client stopped, listings of every
// directory and the status and leases of every generation through each
// state's directory: any retirement still pending must be finished by now.
func (e *env) finalReads(client int) {
	for _, dir := range []Dir{DirGenerations, DirTombstones, DirRetiring, DirLeases} {
		e.do(client, Input{Op: OpList, Dir: dir, Group: AllGroups})
	}
	gens := e.track.all()
	for _, gen := range slices.Sorted(maps.Keys(gens)) {
		for _, dir := range []Dir{DirGenerations, DirTombstones, DirRetiring} {
			e.do(client, Input{Op: OpStatus, Dir: dir, Group: gens[gen], Gen: gen})
			e.do(client, Input{Op: OpListLeases, Dir: dir, Group: gens[gen], Gen: gen})
		}
	}
}

// TestConcurrentTree runs clients publishing, creating, binding (by an
// open with the launch ID, and by `pid N`), ending bound processes,
// releasing, cancelling, killing, tombstoning, lifting and retiring at
// once, through a real `templatefs mount` daemon in a child process,
// records every operation and checks the history against Model
// (fuse-and-store-notes.md §E4).
func TestConcurrentTree(t *testing.T) {
	duration := envDurationOr(t, envDuration, 3*time.Second)
	checkTimeout := envDurationOr(t, envCheckTimeout, 2*time.Minute)
	clients := envIntOr(t, envClients, 8)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
	}
	t.Logf("%d clients for %v, %s=%d", clients, duration, envSeed, seed)

	e := newEnv(t)
	setup := clients // the client ID of setup and final operations
	var group0 []store.GenerationID
	for group := range groups {
		for _, eligible := range []bool{true, true, false} {
			out := e.do(setup, Input{Op: OpPublish, Group: group, Eligible: eligible})
			if out.Result != ResultOK {
				t.Fatalf("publish: %s", out.Result)
			}
			if group == 0 {
				group0 = append(group0, out.Gen)
			}
		}
	}
	first := group0[0]
	// A recorded prelude reaches the outcomes that random clients hit
	// rarely on a loaded machine: a leased generation is retired, so rmdir
	// of retiring/<gen> (EBUSY) and lifting it (EPERM) are refused until
	// its lease is released.
	// Then rm of the reserved lease is refused (EBUSY), and cancel ends
	// it.
	clone := "k0-c0"
	for _, in := range []Input{
		{Op: OpAcquire, Dir: DirGenerations, Clone: clone},
		{Op: OpTombstone, Dir: DirGenerations},
		{Op: OpRetire, Dir: DirTombstones},
		{Op: OpRetire, Dir: DirRetiring},
		{Op: OpLift, Dir: DirRetiring},
		{Op: OpRelease, Dir: DirLeases, Clone: clone},
		{Op: OpCancel, Dir: DirLeases, Clone: clone},
	} {
		in.Group, in.Gen = 0, first
		e.do(setup, in)
	}
	e.leasePrelude(setup, group0[1], group0[2])

	// Clients run for duration, and on (up to maxOvertime times as long
	// in all) until the history holds every coverage outcome.
	start := time.Now()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for !stop.Load() {
				e.step(c, rng)
			}
		})
	}
	time.Sleep(duration)
	for len(missing(e.rec.History())) > 0 && time.Since(start) < maxOvertime*duration {
		time.Sleep(duration / 10)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("clients ran for %v", time.Since(start).Round(time.Millisecond))
	for c := range clients {
		for _, n := range e.procs.ownedBy(c) {
			p := e.procs.get(n)
			e.do(c, Input{Op: OpExit, Group: p.group, Clone: p.clone, Proc: n})
		}
	}
	e.finalReads(setup)

	history := e.rec.History()
	t.Logf("%d operations; outcomes:\n%s", len(history), outcomes(history))
	checkPublications(t, history)
	check(t, history, checkTimeout)
	for _, m := range missing(history) {
		t.Errorf("no operation had the outcome %q in %v: raise %s", m, maxOvertime*duration, envDuration)
	}
	if r := harness.RunStatus(t, "fsck", e.store); r.Code != 0 {
		t.Errorf("fsck after the run (through the daemon): %s", r)
	}
	e.daemon.Stop()
}

// leasePrelude records, on gen (published, eligible, group 0; other is
// another generation of the group), what the
// random clients reach rarely: a lease bound by "pid N" is not released
// by rm while its process runs, and is once it has exited; a lease bound
// by an open with its launch ID is not cancelled, and is killed; a
// process carrying a reserved lease's launch ID (its open of another
// generation binds nothing) keeps cancel refused until it exits.
func (e *env) leasePrelude(client int, gen, other store.GenerationID) {
	do := func(in Input) Output {
		in.Group = 0
		if in.Gen == 0 {
			in.Gen = gen
		}
		return e.do(client, in)
	}
	launch := func(clone string, gen store.GenerationID) Input {
		l, _ := e.leases.get(clone)
		in := Input{Op: OpSpawn, Dir: DirGenerations, Gen: gen, Clone: clone, Seq: l.Seq, Launch: l.Launch, Proc: e.procs.number()}
		do(in)
		in.Op = OpBind
		return in
	}
	clone := "k0-c1"
	do(Input{Op: OpAcquire, Dir: DirGenerations, Clone: clone})
	p := e.procs.number()
	do(Input{Op: OpBind, ByPID: true, Dir: DirLeases, Clone: clone, Proc: p})
	do(Input{Op: OpRelease, Dir: DirLeases, Clone: clone})
	do(Input{Op: OpExit, Clone: clone, Proc: p})
	do(Input{Op: OpRelease, Dir: DirLeases, Clone: clone})

	do(Input{Op: OpAcquire, Dir: DirGenerations, Clone: clone})
	in := launch(clone, gen)
	do(in)
	do(Input{Op: OpCancel, Dir: DirLeases, Clone: clone})
	do(Input{Op: OpKill, Dir: DirLeases, Clone: clone})
	do(Input{Op: OpExit, Clone: clone, Proc: in.Proc})

	do(Input{Op: OpAcquire, Dir: DirGenerations, Clone: clone})
	in = launch(clone, other) // its open binds nothing
	do(in)
	do(Input{Op: OpCancel, Dir: DirLeases, Clone: clone})
	do(Input{Op: OpExit, Clone: clone, Proc: in.Proc})
	do(Input{Op: OpCancel, Dir: DirLeases, Clone: clone})
}

// check runs porcupine on history. On a violation it writes porcupine's
// visualization to a file that outlives the test, logs its path and fails
// with the history of every group that has no linearization.
func check(t *testing.T, history []porcupine.Operation, timeout time.Duration) {
	t.Helper()
	model := Model()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, timeout)
	t.Logf("porcupine: %s in %v", res, time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Fatalf("porcupine gave no verdict within %v on %d operations: a timeout is a failure, not a pass; "+
			"shorten %s or raise %s", timeout, len(history), envDuration, envCheckTimeout)
	}
	if f, err := os.CreateTemp("", "templatefs-concurrency-*.html"); err != nil {
		t.Errorf("visualization: %v", err)
	} else {
		if err := porcupine.Visualize(model, info, f); err != nil {
			t.Errorf("visualization: %v", err)
		}
		f.Close()
		t.Logf("porcupine visualization: %s", f.Name())
	}
	partials := info.PartialLinearizations()
	for i, part := range Partition(history) {
		if porcupine.CheckOperationsTimeout(model, part, timeout) != porcupine.Ok {
			t.Errorf("group %d: history is not linearizable: %s(%d operations, times in ms: call, return):\n%s",
				i, Explain(model, part, partials[i]), len(part), FormatHistory(part))
		}
	}
	t.FailNow()
}

// outcomes counts the history's operations by kind and result.
func outcomes(history []porcupine.Operation) string {
	counts := map[string]int{}
	for _, op := range history {
		counts[op.Input.(Input).Op.String()+" "+op.Output.(Output).Result]++
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "  %-28s %6d\n", k, counts[k])
	}
	return b.String()
}

// checkPublications fails if two publications returned the same ID: the
// model cannot see a reuse after the first generation is gone.
func checkPublications(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	seen := map[store.GenerationID]bool{}
	for _, op := range history {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Op != OpPublish || out.Result != ResultOK {
			continue
		}
		if seen[out.Gen] {
			t.Errorf("generation ID %s published twice", out.Gen)
		}
		seen[out.Gen] = true
	}
}

// coverage lists the outcomes a run must reach, so that one too short or
// too slow to test the rules does not pass quietly.
var coverage = []struct {
	op     Op
	result string
}{
	{OpPublish, ResultOK},
	{OpAcquire, ResultOK},
	{OpAcquire, errEEXIST},
	{OpAcquire, errEBUSY},
	{OpAcquire, errEPERM},
	{OpRelease, errEBUSY}, // a reserved lease, or one whose process runs
	{OpRelease, ResultOK}, // only a lease whose process has exited: the prelude's has been seen exited
	{OpBind, ResultOK},
	{OpBind, errEPERM},
	{OpExit, ResultOK},
	{OpCancel, ResultOK},
	{OpCancel, errEBUSY},
	{OpKill, ResultOK},
	{OpKill, errEBUSY},
	{OpTombstone, ResultOK},
	{OpLift, ResultOK},
	{OpLift, errnoRetiring},
	{OpRetire, ResultOK},
	{OpRetire, errnoNotTombstoned},
	{OpRetire, errnoRetirementPending},
}

// missing returns the coverage outcomes history lacks, as "op result".
func missing(history []porcupine.Operation) []string {
	var out []string
	for _, w := range coverage {
		if !slices.ContainsFunc(history, func(op porcupine.Operation) bool {
			return op.Input.(Input).Op == w.op && op.Output.(Output).Result == w.result
		}) {
			out = append(out, w.op.String()+" "+w.result)
		}
	}
	return out
}
