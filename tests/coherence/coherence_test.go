//go:build linux

// Package coherence checks that a mount's kernel caches never show a
// stale tree: random changes through the mount (create, bind, cancel, rm,
// mv to tombstones/ and back, ctl writes, rmdir), through the CLI channel
// (publish and settings, run by the daemon) and by the daemon itself (a
// leased process exits; a retirement finishes) while real ls, stat and cat
// processes look. After each change made through the mount or the CLI
// returns, every observer's next look must show it (read-your-writes
// across processes); one the daemon makes by itself must show within a
// bound once it is visible at all. No tool may ever report "Stale file
// handle" (ESTALE).
package coherence

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"templatefs/tests/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// Budget bounds the random operations of one run (CI: 2 noisy cores,
// -race); SeedEnv names the variable that replays a run's seed.
const (
	Budget  = 30 * time.Second
	SeedEnv = "TEMPLATEFS_COHERENCE_SEED"
	// settle bounds the wait for a change the daemon makes by itself to
	// reach every observer once the change is visible.
	settle = 10 * time.Second
	// observers is how many independent observers check after each change.
	observers = 3
	// maxLeases and maxGenerations keep each check small.
	maxLeases, maxGenerations = 6, 5
)

func TestCoherenceGoFuse(t *testing.T) { run(t, "go-fuse") }

func TestCoherenceCgofuse(t *testing.T) {
	if !harness.Cgofuse {
		t.Skip("cgofuse backend: built without -tags fuse3")
	}
	run(t, "cgofuse")
}

// stateDirs are the directories a generation moves between.
var stateDirs = []string{"generations", "tombstones", "retiring"}

// lease is the model of one lease.
type lease struct {
	gen     string // its generation
	state   string // reserved, bound or exited
	sleeper *exec.Cmd
}

// world is the model of the tree and the real things behind it.
type world struct {
	t             *testing.T
	rng           *rand.Rand
	seed          uint64
	store, mnt    string
	capture, cls  string
	key           string
	gens          map[string]string // generation -> its state directory ("" once deleted)
	leases        map[string]*lease
	gone          []string // clone IDs released: none of their names may resolve
	next          int      // the next clone number
	restoreWindow string
	stop          chan struct{}
	stale         chan string // an ESTALE seen by a background looker
	holders       []*exec.Cmd // processes holding a payload open, sleepers of bound leases among them
}

func run(t *testing.T, backend string) {
	harness.RequireFUSE(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with %s=%d", SeedEnv, seed)
		}
	})
	dir := t.TempDir()
	w := &world{t: t, rng: rand.New(rand.NewPCG(seed, 0)), seed: seed,
		store: filepath.Join(dir, "store"), mnt: filepath.Join(dir, "mnt"),
		capture: filepath.Join(dir, "cap", "capture"), cls: filepath.Join(dir, "cap", "class.json"),
		gens: map[string]string{}, leases: map[string]*lease{}, restoreWindow: "720h0m0s",
		stop: make(chan struct{}), stale: make(chan string, 1)}
	if err := os.Mkdir(w.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	harness.Run(t, "init", w.store)
	harness.Run(t, "sample-capture", "--memory", "1MiB", filepath.Join(dir, "cap"))
	first := w.publish()
	w.gens[first] = "generations"
	d := harness.StartMount(t, w.store, w.mnt, "--backend", backend)
	w.holder(filepath.Join("generations", first, "payload", "state.bin"))
	w.key = w.keyID()
	var lookers sync.WaitGroup
	for range 2 {
		lookers.Add(1)
		go func() { defer lookers.Done(); w.look() }()
	}
	defer func() {
		close(w.stop)
		lookers.Wait()
		for _, h := range w.holders {
			h.Process.Kill()
			h.Wait()
		}
		d.Stop()
	}()

	steps := 0
	for start := time.Now(); time.Since(start) < Budget || steps < 20; steps++ {
		what, internal := w.step()
		if internal {
			w.checkWithin(what, settle)
		} else {
			w.check(what)
		}
		select {
		case msg := <-w.stale:
			t.Fatalf("seed %d, after %s: a background looker saw ESTALE: %s", w.seed, what, msg)
		default:
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("seed %d: %d operations, all seen by %d observers", w.seed, steps, observers)
}

// step does one random operation and says what it did; internal reports
// a change the daemon made by itself.
func (w *world) step() (what string, internal bool) {
	published := w.in("generations")
	tombstoned := w.in("tombstones")
	var ops []func() (string, bool)
	if len(published) > 0 && len(w.leases) < maxLeases {
		ops = append(ops, w.create, w.create)
	}
	if len(w.gens) < maxGenerations || len(published) == 0 {
		ops = append(ops, w.cliPublish)
	}
	ops = append(ops, w.cliSettings)
	clones := make([]string, 0, len(w.leases))
	for clone := range w.leases {
		clones = append(clones, clone)
	}
	slices.Sort(clones) // the seed replays the same choices
	for _, clone := range clones {
		switch w.leases[clone].state {
		case "reserved":
			ops = append(ops, func() (string, bool) { return w.cancel(clone) })
			if w.gens[w.leases[clone].gen] == "generations" { // only a published generation binds
				ops = append(ops, func() (string, bool) { return w.bind(clone) })
			}
		case "bound":
			ops = append(ops, func() (string, bool) { return w.exit(clone) }, func() (string, bool) { return w.rmBusy(clone) })
		case "exited":
			ops = append(ops, func() (string, bool) { return w.rm(clone) })
		}
	}
	for _, g := range published {
		ops = append(ops, func() (string, bool) { return w.tombstone(g) }, func() (string, bool) { return w.flip(g) })
	}
	for _, g := range tombstoned {
		ops = append(ops, func() (string, bool) { return w.lift(g) }, func() (string, bool) { return w.retire(g) },
			func() (string, bool) { return w.flip(g) })
	}
	return ops[w.rng.IntN(len(ops))]()
}

// in lists the generations in state directory dir, sorted.
func (w *world) in(dir string) []string {
	var out []string
	for g, d := range w.gens {
		if d == dir {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}

func (w *world) pick(names []string) string { return names[w.rng.IntN(len(names))] }

func (w *world) path(p ...string) string { return filepath.Join(append([]string{w.mnt}, p...)...) }

// names are the paths of clone's lease file below the mount.
func (w *world) names(clone string) []string {
	out := []string{filepath.Join("leases", clone), filepath.Join("keys", w.key, "leases", clone)}
	if l := w.leases[clone]; l != nil && w.gens[l.gen] != "" {
		out = append(out, filepath.Join(w.gens[l.gen], l.gen, "leases", clone))
	}
	return out
}

func (w *world) must(what string, err error) {
	if err != nil {
		w.t.Fatalf("seed %d: %s: %v", w.seed, what, err)
	}
}

func (w *world) create() (string, bool) {
	w.next++
	clone := fmt.Sprintf("c%d", w.next)
	var p string
	if w.rng.IntN(2) == 0 {
		p = filepath.Join("generations", w.pick(w.in("generations")), "leases", clone)
	} else {
		p = filepath.Join("keys", w.key, "leases", clone)
	}
	f, err := os.OpenFile(w.path(p), os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o644)
	w.must("create "+p, err)
	f.Close()
	var rec struct {
		Generation string `json:"store_generation"`
	}
	b, err := os.ReadFile(w.path("leases", clone))
	w.must("read lease "+clone, err)
	w.must("decode lease "+clone, json.Unmarshal(b, &rec))
	w.leases[clone] = &lease{gen: rec.Generation, state: "reserved"}
	return "create " + p, false
}

// write writes one command line to the file at p below the mount.
func (w *world) write(p, command string) error {
	return os.WriteFile(w.path(p), []byte(command+"\n"), 0o644)
}

func (w *world) bind(clone string) (string, bool) {
	l := w.leases[clone]
	l.sleeper = w.holder(filepath.Join(w.gens[l.gen], l.gen, "payload", "memory.bin"))
	p := w.pick(w.names(clone))
	w.must("bind "+p, w.write(p, fmt.Sprintf("pid %d", l.sleeper.Process.Pid)))
	l.state = "bound"
	return "pid > " + p, false
}

func (w *world) cancel(clone string) (string, bool) {
	p := w.pick(w.names(clone))
	w.must("cancel "+p, w.write(p, "cancel"))
	w.release(clone)
	return "cancel > " + p, false
}

// exit kills a bound lease's process; the daemon records the exit by
// itself. It returns once the exit is visible (cat reads the daemon).
func (w *world) exit(clone string) (string, bool) {
	l := w.leases[clone]
	l.sleeper.Process.Kill()
	l.sleeper.Wait()
	l.sleeper, l.state = nil, "exited"
	deadline := time.Now().Add(settle)
	for {
		b, err := os.ReadFile(w.path("leases", clone))
		w.must("read lease "+clone, err)
		if strings.Contains(string(b), `"state":"exited"`) {
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("seed %d: lease %s not exited %v after its process was killed: %s", w.seed, clone, settle, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.afterLeaseGone(l.gen)
	return "process of " + clone + " exited", true
}

func (w *world) rmBusy(clone string) (string, bool) {
	p := w.pick(w.names(clone))
	if err := os.Remove(w.path(p)); !errors.Is(err, syscall.EBUSY) {
		w.t.Fatalf("seed %d: rm %s of a lease whose process runs: %v, want EBUSY", w.seed, p, err)
	}
	return "rm (busy) " + p, false
}

func (w *world) rm(clone string) (string, bool) {
	p := w.pick(w.names(clone))
	w.must("rm "+p, os.Remove(w.path(p)))
	w.release(clone)
	return "rm " + p, false
}

// release drops clone from the model; its generation may finish retiring.
func (w *world) release(clone string) {
	l := w.leases[clone]
	delete(w.leases, clone)
	w.gone = append(w.gone, clone)
	if len(w.gone) > 4 {
		w.gone = w.gone[1:]
	}
	w.afterLeaseGone(l.gen)
}

// afterLeaseGone deletes gen from the model if it is retiring and no
// lease keeps it (an exited lease no longer does).
func (w *world) afterLeaseGone(gen string) {
	if w.gens[gen] != "retiring" {
		return
	}
	for _, l := range w.leases {
		if l.gen == gen && l.state != "exited" {
			return
		}
	}
	w.gens[gen] = ""
}

func (w *world) tombstone(g string) (string, bool) {
	w.gens[g] = "tombstones"
	if w.rng.IntN(2) == 0 {
		w.must("mv "+g, os.Rename(w.path("generations", g), w.path("tombstones", g)))
		return "mv generations/" + g + " tombstones/", false
	}
	w.must("tombstone "+g, w.write(filepath.Join("generations", g, "ctl"), "tombstone"))
	return "tombstone > generations/" + g + "/ctl", false
}

func (w *world) lift(g string) (string, bool) {
	w.gens[g] = "generations"
	if w.rng.IntN(2) == 0 {
		w.must("mv "+g, os.Rename(w.path("tombstones", g), w.path("generations", g)))
		return "mv tombstones/" + g + " generations/", false
	}
	w.must("lift "+g, w.write(filepath.Join("tombstones", g, "ctl"), "lift"))
	return "lift > tombstones/" + g + "/ctl", false
}

// flip moves g by a ctl write and at once back by a rename, with no look
// between: the rename's lookup of the new path runs while the kernel
// holds the rename lock (the ESTALE of issue 10 when the old path's
// dentry is still alive).
func (w *world) flip(g string) (string, bool) {
	from, to, cmd := "generations", "tombstones", "tombstone"
	if w.gens[g] == "tombstones" {
		from, to, cmd = to, from, "lift"
	}
	w.must(cmd+" "+g, w.write(filepath.Join(from, g, "ctl"), cmd))
	w.must("mv "+g, os.Rename(w.path(to, g), w.path(from, g)))
	return fmt.Sprintf("%s > %s/%s/ctl, then mv %s/%s %s/", cmd, from, g, to, g, from), false
}

func (w *world) retire(g string) (string, bool) {
	w.gens[g] = "retiring"
	what := "rmdir tombstones/" + g
	if w.rng.IntN(2) == 0 {
		w.must(what, syscall.Rmdir(w.path("tombstones", g)))
	} else {
		what = "retire > tombstones/" + g + "/ctl"
		w.must(what, w.write(filepath.Join("tombstones", g, "ctl"), "retire"))
	}
	w.afterLeaseGone(g)
	return what, false
}

// holder starts a process that holds the payload at p (below the mount)
// open by that path, as a VM holds its memory image: the kernel keeps the
// path's directories alive while the generation moves. The run kills and
// reaps it before it unmounts.
func (w *world) holder(p string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", `exec 3<"$1" && exec sleep 600`, "sh", w.path(p))
	w.must("start a holder of "+p, cmd.Start())
	w.holders = append(w.holders, cmd)
	return cmd
}

// publish runs `templatefs publish` (through the daemon once mounted).
func (w *world) publish() string {
	out := harness.Lines(harness.Run(w.t, "publish", "--duplicate", w.store, w.capture, "--class", w.cls))
	return out[len(out)-1]
}

func (w *world) cliPublish() (string, bool) {
	g := w.publish()
	w.gens[g] = "generations"
	w.holder(filepath.Join("generations", g, "payload", "state.bin"))
	return "templatefs publish (" + g + ")", false
}

func (w *world) cliSettings() (string, bool) {
	w.restoreWindow = map[string]string{"720h0m0s": "72h0m0s", "72h0m0s": "720h0m0s"}[w.restoreWindow]
	harness.Run(w.t, "settings", "--restore-window", w.restoreWindow, w.store)
	return "templatefs settings --restore-window " + w.restoreWindow, false
}

func (w *world) keyID() string {
	names, err := os.ReadDir(w.path("keys"))
	w.must("ls keys", err)
	if len(names) != 1 {
		w.t.Fatalf("keys/ lists %d keys, want 1", len(names))
	}
	return names[0].Name()
}

// look runs ls -l, stat and cat over the tree in a loop until the run
// stops, with a process whose working directory is a generation (a holder
// of the old path when the generation moves), and reports any ESTALE.
func (w *world) look() {
	dirs := []string{w.path("generations"), w.path("tombstones"), w.path("retiring"), w.path("leases")}
	// Each generation directory becomes a subshell's working directory for
	// a moment: a holder of its path while a change moves it.
	script := `for g in "$1"/generations/* "$1"/tombstones/* "$1"/retiring/*; do
(cd "$g" 2>/dev/null && ls -l . leases payload >/dev/null && cat status >/dev/null; sleep 0.05) & done; wait`
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		for _, cmd := range []*exec.Cmd{
			exec.Command("ls", append([]string{"-lR"}, dirs...)...),
			exec.Command("sh", "-c", script, "sh", w.mnt),
		} {
			out, _ := cmd.CombinedOutput()
			if strings.Contains(string(out), "Stale file handle") {
				select {
				case w.stale <- string(out):
				default:
				}
			}
		}
	}
}

// check has every observer look at the whole model once: each must see
// exactly what the model says, at once.
func (w *world) check(what string) {
	w.t.Helper()
	if errs := w.observe(); len(errs) > 0 {
		w.t.Fatalf("seed %d: after %q returned, an observer's next look disagrees:\n%s", w.seed, what, strings.Join(errs, "\n"))
	}
}

// checkWithin is check for a change the daemon made by itself: every
// observer must agree within d.
func (w *world) checkWithin(what string, d time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for {
		errs := w.observe()
		if len(errs) == 0 {
			return
		}
		if stale(errs) || time.Now().After(deadline) {
			w.t.Fatalf("seed %d: %v after %q, observers still disagree:\n%s", w.seed, d, what, strings.Join(errs, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stale(errs []string) bool {
	return slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "Stale file handle") })
}

// observe runs the observers at once, each a shell of its own running ls
// -l, stat and cat, and returns what any saw that the model does not say.
func (w *world) observe() []string {
	script, expect := w.script()
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for i := range observers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("sh", "-c", script).CombinedOutput()
			got := expect(string(out))
			if err != nil {
				got = append(got, fmt.Sprintf("observer shell: %v", err))
			}
			mu.Lock()
			for _, e := range got {
				errs = append(errs, fmt.Sprintf("observer %d: %s", i, e))
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errs
}

// script returns the observers' shell script and a function checking its
// output against the model: sections start with a line "@ KIND PATH".
func (w *world) script() (string, func(string) []string) {
	var b strings.Builder
	section := func(kind, p, cmd string) {
		fmt.Fprintf(&b, "echo '@ %s %s'; %s 2>&1\n", kind, p, cmd)
	}
	q := func(p string) string { return "'" + w.path(p) + "'" }
	for _, d := range stateDirs {
		section("ls", d, "LC_ALL=C ls -l "+q(d))
		for _, g := range w.in(d) {
			section("ls", filepath.Join(d, g, "leases"), "LC_ALL=C ls -l "+q(filepath.Join(d, g, "leases")))
		}
	}
	section("ls", "leases", "LC_ALL=C ls -l "+q("leases"))
	for g := range w.gens {
		for _, d := range stateDirs {
			section("stat", filepath.Join(d, g), "stat -c %i "+q(filepath.Join(d, g)))
		}
		if d := w.gens[g]; d != "" {
			section("statcat", filepath.Join(d, g, "status"), "stat -c %s "+q(filepath.Join(d, g, "status"))+"; cat "+q(filepath.Join(d, g, "status")))
		}
	}
	for clone := range w.leases {
		for _, p := range w.names(clone) {
			section("statcat", p, "stat -c %s "+q(p)+"; cat "+q(p))
		}
	}
	for _, clone := range w.gone {
		for _, p := range []string{filepath.Join("leases", clone), filepath.Join("keys", w.key, "leases", clone)} {
			section("stat", p, "stat -c %i "+q(p))
		}
	}
	b.WriteString("true\n") // a section's failure is its output, not the shell's status
	return b.String(), w.expect
}

// expect checks the observers' output (see script) against the model.
func (w *world) expect(out string) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for _, sec := range strings.Split(out, "@ ")[1:] {
		head, body, _ := strings.Cut(sec, "\n")
		kind, p, _ := strings.Cut(head, " ")
		if strings.Contains(body, "Stale file handle") {
			bad("%s %s: %s", kind, p, strings.TrimSpace(body))
			continue
		}
		switch kind {
		case "ls":
			want := w.listing(p)
			var got []string
			for _, line := range harness.Lines(body) {
				if f := strings.Fields(line); len(f) >= 9 {
					got = append(got, f[len(f)-1])
				}
			}
			if !slices.Equal(got, want) {
				bad("ls -l %s lists %q, want %q:\n%s", p, got, want, body)
			}
		case "stat":
			exists := w.exists(p)
			if failed := strings.Contains(body, "No such file"); failed == exists {
				bad("stat %s: %q, want it to exist: %v", p, strings.TrimSpace(body), exists)
			}
		case "statcat":
			size, text, _ := strings.Cut(body, "\n")
			if n, err := strconv.Atoi(size); err != nil || n != len(text) {
				bad("stat %s says size %q, cat reads %d bytes: %q", p, size, len(text), text)
				continue
			}
			if strings.HasPrefix(p, "leases/") || strings.Contains(p, "/leases/") {
				clone := filepath.Base(p)
				if want := `"state":"` + w.leases[clone].state + `"`; !strings.Contains(text, want) {
					bad("cat %s: %q, want %s", p, text, want)
				}
			} else if want := "restore_window: " + w.restoreWindow; !strings.Contains(text, want) {
				bad("cat %s: %q, want %q", p, text, want)
			}
		}
	}
	return errs
}

// listing is what ls of directory p (below the mount) must show, sorted.
func (w *world) listing(p string) []string {
	var out []string
	switch {
	case p == "leases":
		for clone := range w.leases {
			out = append(out, clone)
		}
	case slices.Contains(stateDirs, p):
		out = w.in(p)
	default: // <state>/<gen>/leases
		gen := filepath.Base(filepath.Dir(p))
		for clone, l := range w.leases {
			if l.gen == gen {
				out = append(out, clone)
			}
		}
	}
	slices.Sort(out)
	return out
}

// exists reports whether the model has a node at p: a generation directory
// or a lease name.
func (w *world) exists(p string) bool {
	parts := strings.Split(p, string(filepath.Separator))
	if len(parts) == 2 && slices.Contains(stateDirs, parts[0]) {
		return w.gens[parts[1]] == parts[0]
	}
	clone := parts[len(parts)-1]
	return w.leases[clone] != nil && slices.Contains(w.names(clone), p)
}
