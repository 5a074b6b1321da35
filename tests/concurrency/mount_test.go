//go:build linux

package concurrency

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
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

	tfs "templatefs/fs"
	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/leasefs"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
	"templatefs/tests/harness"
)

// Knobs, read from the environment.
const (
	envDuration     = "TEMPLATEFS_CONCURRENCY_DURATION"      // how long clients run; Go duration, default 3s
	envClients      = "TEMPLATEFS_CONCURRENCY_CLIENTS"       // concurrent clients, default 8
	envSeed         = "TEMPLATEFS_CONCURRENCY_SEED"          // seed of the clients' choices; default from the clock, logged
	envCheckTimeout = "TEMPLATEFS_CONCURRENCY_CHECK_TIMEOUT" // porcupine's budget; Go duration, default 2m
	envRequireFUSE  = "TEMPLATEFS_REQUIRE_FUSE"              // "1": fail instead of skipping without FUSE
)

const (
	groups         = 2 // lease groups: see the package doc
	clonesPerGroup = 4 // few clone IDs, so creates conflict
	maxLive        = 3 // a group publishes while fewer of its generations are not known to be retiring
	maxOvertime    = 4 // clients run at most this many times the duration to reach every coverage outcome
)

// Fixed host facts, so eligibility depends only on the capture: the
// eligible capture is one second old on the same boot's monotonic clock,
// the ineligible one an hour in this host's future.
var (
	hostID        = [16]byte{0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11}
	bootID        = [16]byte{0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22}
	hostMonotonic = uint64(100 * time.Hour)
)

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

// env is a store with fixed host facts, mounted in-process with fs.Mount.
type env struct {
	t        *testing.T
	st       *store.Store
	mnt      string
	class    templatekey.Class
	captures map[bool]string // by eligibility
	rec      *Recorder
	track    *tracker
	leases   *leases // launch_test.go
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		harness.SkipOrFail(t, "FUSE unavailable: %v", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			harness.SkipOrFail(t, "not root and no fusermount3: %v", err)
		}
	}
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	if err := store.Init(storeDir); err != nil {
		t.Fatal(err)
	}
	now := hostclock.Now()
	facts := store.HostFacts{HostID: hostID, BootID: bootID, HostClock: manifest.HostClockLinuxBoottime, MonotonicNs: hostMonotonic, UTC: now}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(storeDir, store.Options{
		Logger: discard,
		Host:   store.HostFunc(func() (store.HostFacts, error) { return facts, nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, class: templatekey.SampleClass(), captures: map[bool]string{}, rec: NewRecorder(),
		track: &tracker{retiring: map[store.GenerationID]bool{}}, leases: &leases{m: map[string]leaseInfo{}}}
	for eligible, mono := range map[bool]uint64{true: hostMonotonic - uint64(time.Second), false: hostMonotonic + uint64(time.Hour)} {
		e.captures[eligible] = capturetest.Make(t, dir, manifest.SampleOptions{
			StateSizeBytes: 4096, MemorySizeBytes: 1 << 20, CaptureUTC: now,
			CaptureMonotonicNs: mono, HostID: hostID, BootID: bootID,
		})
	}
	lfs, err := leasefs.New(st, leasefs.Options{Logger: discard})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	e.mnt = t.TempDir()
	srv, err := tfs.Mount(e.mnt, lfs, tfs.MountOptions{Logger: discard})
	if err != nil {
		st.Close()
		harness.SkipOrFail(t, "mount %s: %v", e.mnt, err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", e.mnt, err)
		}
		srv.Wait()
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return e
}

func (e *env) path(elems ...string) string {
	return filepath.Join(append([]string{e.mnt}, elems...)...)
}

// do performs one operation as client and records it.
func (e *env) do(client int, in Input) Output {
	return e.rec.Do(client, in, e.perform)
}

// perform executes in through the mount (OpPublish: the store) and
// reports its result.
func (e *env) perform(in Input) Output {
	gen := e.path(in.Dir.String(), in.Gen.String())
	var err error
	switch {
	case in.Op == OpPublish:
		g, err := e.st.Publish(e.captures[in.Eligible], &e.class)
		if err != nil {
			return Output{Result: "error: " + err.Error()}
		}
		e.track.published(in.Group, g.ID)
		return Output{Result: ResultOK, Gen: g.ID}
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

// step makes one random operation of client.
func (e *env) step(client int, rng *rand.Rand) {
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

// TestConcurrentTree runs clients creating, releasing, cancelling,
// killing, tombstoning, lifting and retiring through the mount at once, records every operation
// and checks the history against Model (fuse-and-store-notes.md §E4).
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
	var first store.GenerationID
	for group := range groups {
		for _, eligible := range []bool{true, true, false} {
			out := e.do(setup, Input{Op: OpPublish, Group: group, Eligible: eligible})
			if out.Result != ResultOK {
				t.Fatalf("publish: %s", out.Result)
			}
			if first == 0 {
				first = out.Gen
			}
		}
	}
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
	e.finalReads(setup)

	history := e.rec.History()
	t.Logf("%d operations; outcomes:\n%s", len(history), outcomes(history))
	checkPublications(t, history)
	check(t, history, checkTimeout)
	for _, m := range missing(history) {
		t.Errorf("no operation had the outcome %q in %v: raise %s", m, maxOvertime*duration, envDuration)
	}
	if problems, err := e.st.Check(store.CheckOptions{}); err != nil || len(problems) > 0 {
		t.Errorf("store check after the run: %v, problems %q", err, problems)
	}
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
	{OpRelease, errEBUSY}, // leases are never bound here: rm ends none (OpBind is checked in model_test.go)
	{OpCancel, ResultOK},
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
