//go:build linux

// Package crash kills real templatefs processes at every fail point of the
// store (store.FailpointEnv) and checks that the store recovers: a daemon
// or CLI process is SIGKILLed at each point in turn, the store is checked
// with `templatefs fsck` as the crash left it, then recovered by a normal
// mount and checked again. The invariants: no lease on a missing or
// retired generation, no acknowledged lease lost, no payload deleted
// while leased, no half-published generation visible, no orphaned payload
// left after recovery. fault_test.go arms error points instead
// (<name>:ENOSPC, <name>:EIO) in real daemons and CLI processes.
package crash

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/tests/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// How a scenario reaches its fail point: the process that dies.
const (
	viaCLI   = "the templatefs CLI"
	viaMount = "a templatefs mount daemon, driven with file tools"
)

// scenario is one crash: a fail point and an operation that reaches it.
type scenario struct {
	name      string // the fail point, with /variant when several rows share it
	failpoint string
	via       string // viaCLI or viaMount
	// setup prepares the scenario's copy of the template store; no mount
	// may be left running.
	setup func(t *testing.T, f *fixture)
	// op runs the operation with fp armed and checks the process died of
	// SIGKILL.
	op func(t *testing.T, f *fixture, fp string)
	// before is the problem kinds a read-only fsck must report right after
	// the crash, in order: leftovers that the next normal open removes.
	before []string
	// fsckRefuses, when set, is what a read-only fsck right after the
	// crash must say as it refuses the store (exit status not 0) instead
	// of listing problems: a migration it may not finish.
	fsckRefuses string
	// check runs on the recovered mount after the common invariants.
	check func(t *testing.T, f *fixture, v *view)
	// after runs once the recovered mount is stopped, before the final
	// fsck.
	after func(t *testing.T, f *fixture)
}

// Names of generations scenarios make: g000001 is the template's; the
// next publish gets g000002.
const (
	g1 = "g000001"
	g2 = "g000002"
)

// copiedArtifacts are the artifacts publish copies, in order; each has a
// fail point publish-copied-<name>.
var copiedArtifacts = []string{manifest.ManifestFileName, manifest.StateFileName, manifest.MemoryFileName, manifest.ScratchFileName}

// copiedPrefix is the dynamic fail point name's prefix (store/publish.go).
const copiedPrefix = "publish-copied-"

// pullMidwayPrefix is the prefix of a pull's kill points (store/pull.go):
// a pull needs a registry, so tests/e2e's TestPullResume kills a real
// pull there and reopens, not this table.
const pullMidwayPrefix = "pull-midway-"

// write returns the tool command that writes text and a newline to path
// with a shell redirection, as `echo text > path` does.
func write(text, path string) []string {
	return []string{"sh", "-c", `printf '%s\n' "$1" > "$2"`, "sh", text, path}
}

func scenarios() []scenario {
	publish := func(capture func(f *fixture) string) func(t *testing.T, f *fixture, fp string) {
		return func(t *testing.T, f *fixture, fp string) {
			f.cliArmed(t, fp, "publish", "--duplicate", f.store, capture(f), "--class", f.class)
		}
	}
	sampleCapture := func(f *fixture) string { return f.sample }
	onlyG1 := func(t *testing.T, f *fixture, v *view) {
		wantGens(t, v, map[string]store.GenerationState{g1: store.Published})
	}
	// mountOp runs op against an armed daemon (fixture.throughMount)
	// after expanding f.expand's placeholders in it.
	mountOp := func(op ...string) func(t *testing.T, f *fixture, fp string) {
		return func(t *testing.T, f *fixture, fp string) { f.throughMount(t, fp, f.expand(op)...) }
	}
	release := func(clone, path string) func(t *testing.T, f *fixture, fp string) {
		return func(t *testing.T, f *fixture, fp string) {
			f.released[clone] = true
			mountOp("rm", path)(t, f, fp)
		}
	}
	// cancel ends a reserved lease, the only way one ends.
	cancel := func(clone, path string) func(t *testing.T, f *fixture, fp string) {
		return func(t *testing.T, f *fixture, fp string) {
			f.released[clone] = true
			mountOp(write("cancel", path)...)(t, f, fp)
		}
	}
	newLease := func(t *testing.T, f *fixture, v *view) {
		// Committed before the kill, so durable although never
		// acknowledged.
		wantLease(t, v, "new", g1, store.Reserved)
	}
	// maybeNewLease: a lease whose create was never acknowledged may
	// exist (its commit ended before the kill) or not; if it does, it is
	// the reserved lease on g1 the create asked for.
	maybeNewLease := func(t *testing.T, f *fixture, v *view) {
		if _, ok := v.leases["new"]; ok {
			wantLease(t, v, "new", g1, store.Reserved)
		}
	}
	tombstonedG1 := func(t *testing.T, f *fixture, v *view) {
		wantGens(t, v, map[string]store.GenerationState{g1: store.Tombstoned})
		wantLease(t, v, "held", g1, store.Reserved)
	}
	tombstoneG1 := func(t *testing.T, f *fixture) { f.tree(t, "mv", "MNT/generations/"+g1, "MNT/tombstones/") }
	// tombstonedG2 publishes g2 and tombstones it; leasedG2 leases it to
	// "last" first.
	tombstonedG2 := func(t *testing.T, f *fixture) {
		f.publish(t, f.sample)
		f.tree(t, "mv", "MNT/generations/"+g2, "MNT/tombstones/")
	}
	leasedG2 := func(t *testing.T, f *fixture) {
		f.publish(t, f.sample)
		f.tree(t, "touch", "MNT/generations/"+g2+"/leases/last")
		f.acked["last"] = g2
		f.tree(t, "mv", "MNT/generations/"+g2, "MNT/tombstones/")
	}
	// retiringG2 retires the leased g2 with rmdir: it stays in retiring/
	// until "last" is released.
	retiringG2 := func(t *testing.T, f *fixture) {
		leasedG2(t, f)
		f.tree(t, "rmdir", "MNT/tombstones/"+g2)
	}
	releasedRetired := func(t *testing.T, f *fixture, v *view) {
		onlyG1(t, f, v)
		wantNoLease(t, v, "last")
	}
	bindExited := func(t *testing.T, f *fixture) { f.bindExited(t, "held") }
	bindLive := func(t *testing.T, f *fixture) { f.bindLive(t, "held") }
	// rmHeldSucceeds releases "held" through the recovered mount: its
	// bound process has exited.
	rmHeldSucceeds := func(t *testing.T, f *fixture) {
		harness.MustTool(t, "rm", f.path("leases", "held"))
		if _, err := os.Lstat(f.path("leases", "held")); err == nil {
			t.Error("leases/held is still there after rm")
		}
		f.released["held"] = true
	}

	rows := []scenario{
		{
			name: "publish-reserved", via: viaCLI, op: publish(sampleCapture), check: onlyG1,
			after: func(t *testing.T, f *fixture) {
				if gen := f.publish(t, f.sample); gen != "g000003" {
					t.Errorf("publish after the crash made %s, want g000003: the reserved %s is never reused", gen, g2)
				}
			},
		},
	}
	for _, a := range copiedArtifacts {
		capture := sampleCapture
		if a == manifest.ScratchFileName {
			capture = func(f *fixture) string { return f.scratch }
		}
		rows = append(rows, scenario{
			name: copiedPrefix + a, via: viaCLI, op: publish(capture),
			before: []string{store.ProblemStagingLeftover}, check: onlyG1,
		})
	}
	rows = append(rows, []scenario{
		{
			// A store of schema version 1 is migrated by the first
			// command that opens it for changes (here publish, killed
			// before it publishes): fsck refuses the half-migrated
			// store, the next mount resumes the migration.
			name: "migrate-committed", via: viaCLI, setup: func(t *testing.T, f *fixture) { f.schemaV1(t) },
			op: publish(sampleCapture), fsckRefuses: "needs migrating",
			check: func(t *testing.T, f *fixture, v *view) {
				onlyG1(t, f, v)
				wantLease(t, v, "held", g1, store.Reserved)
			},
		},
		{
			name: "publish-renamed", via: viaCLI, op: publish(sampleCapture),
			before: []string{store.ProblemPayloadOrphaned}, check: onlyG1,
		},
		{
			name: "lease-committed/generation", via: viaMount,
			op: mountOp("touch", "MNT/generations/"+g1+"/leases/new"), check: newLease,
		},
		{
			name: "lease-committed/key", via: viaMount,
			op: mountOp("touch", "MNT/keys/{key}/leases/new"), check: newLease,
		},
		{
			// Killed between create and close: the create was answered
			// (the lease reserved, its commit started), the close waits
			// for the commit. Never acknowledged; the commit may or may
			// not have reached the disk, and either way the store is
			// consistent.
			name: "lease-awaited/touch", via: viaMount,
			op: mountOp("touch", "MNT/generations/"+g1+"/leases/new"), check: maybeNewLease,
		},
		{
			name: "lease-awaited/key", via: viaMount,
			op: mountOp("touch", "MNT/keys/{key}/leases/new"), check: maybeNewLease,
		},
		{
			// open(O_CREAT|O_EXCL), a write of `pid N` before the close:
			// the write waits for the lease's commit.
			name: "lease-awaited/write", via: viaMount,
			op:    mountOp("sh", "-c", `set -C; echo "pid $$" > "$1"`, "sh", "MNT/generations/"+g1+"/leases/new"),
			check: maybeNewLease,
		},
		{
			name: "tombstone-committed/mv", via: viaMount,
			op: mountOp("mv", "MNT/generations/"+g1, "MNT/tombstones/"), check: tombstonedG1,
		},
		{
			name: "tombstone-committed/ctl", via: viaMount,
			op: mountOp(write("tombstone", "MNT/generations/"+g1+"/ctl")...), check: tombstonedG1,
		},
		{
			name: "lift-committed/mv", via: viaMount, setup: tombstoneG1,
			op: mountOp("mv", "MNT/tombstones/"+g1, "MNT/generations/"), check: onlyG1,
		},
		{
			name: "lift-committed/ctl", via: viaMount, setup: tombstoneG1,
			op: mountOp(write("lift", "MNT/tombstones/"+g1+"/ctl")...), check: onlyG1,
		},
		{
			// No leases: the deletion would follow at once.
			name: "retire-intent-committed/rmdir", via: viaMount, setup: tombstonedG2,
			op:     mountOp("rmdir", "MNT/tombstones/"+g2),
			before: []string{store.ProblemRetirementPending}, check: onlyG1,
		},
		{
			// Retiring a leased generation: the payload must stay.
			name: "retire-intent-committed/ctl-leased", via: viaMount, setup: leasedG2,
			op: mountOp(write("retire", "MNT/tombstones/"+g2+"/ctl")...),
			check: func(t *testing.T, f *fixture, v *view) {
				wantGens(t, v, map[string]store.GenerationState{g1: store.Published, g2: store.Retiring})
				wantLease(t, v, "last", g2, store.Reserved)
			},
		},
		{
			// The release of the last lease of a retiring generation
			// deletes it; the daemon dies between record and payload.
			name: "retire-record-deleted", via: viaMount, setup: retiringG2,
			op:     cancel("last", "MNT/retiring/"+g2+"/leases/last"),
			before: []string{store.ProblemPayloadOrphaned}, check: releasedRetired,
		},
		{
			name: "retire-payload-deleted", via: viaMount, setup: retiringG2,
			op: cancel("last", "MNT/retiring/"+g2+"/leases/last"), check: releasedRetired,
		},
		{
			name: "settings-committed", via: viaCLI,
			op: func(t *testing.T, f *fixture, fp string) {
				f.cliArmed(t, fp, "settings", "--restore-window", "48h", f.store)
			},
			after: func(t *testing.T, f *fixture) {
				if out := harness.Run(t, "settings", f.store); !strings.HasPrefix(out, "restore_window: 48h0m0s\n") {
					t.Errorf("settings after the crash:\n%s\nwant restore_window: 48h0m0s", out)
				}
			},
		},
		{
			name: "repair-index-committed", via: viaCLI,
			setup: func(t *testing.T, f *fixture) {
				f.dropIndexRow(t, g1, "held")
				if got := f.fsckKinds(t); !slices.Equal(got, []string{store.ProblemLeaseIndexMissing}) {
					t.Fatalf("fsck of the damaged index found %q, want [%s]", got, store.ProblemLeaseIndexMissing)
				}
			},
			op: func(t *testing.T, f *fixture, fp string) {
				f.cliArmed(t, fp, "fsck", "--repair", f.store)
			},
			check: func(t *testing.T, f *fixture, v *view) {
				wantLease(t, v, "held", g1, store.Reserved)
				if got := harness.Lines(harness.MustTool(t, "ls", f.path("generations", g1, "leases"))); !slices.Equal(got, []string{"held"}) {
					t.Errorf("ls generations/%s/leases = %q, want [held]", g1, got)
				}
			},
		},
		{
			name: "bind-committed", via: viaMount,
			setup: func(t *testing.T, f *fixture) { f.proc = harness.Sleeper(t) },
			op:    mountOp(write("pid {pid}", "MNT/leases/held")...),
			check: func(t *testing.T, f *fixture, v *view) {
				l := wantLease(t, v, "held", g1, store.Bound)
				if l.Process == nil || l.Process.PID != f.proc.Process.Pid {
					t.Errorf("held is bound to %+v, want pid %d", l.Process, f.proc.Process.Pid)
				}
			},
		},
		{
			// The release after a kill is durably begun, the exit not yet
			// checked: the lease stays Releasing until a release verifies
			// the exit, or the next daemon finds the process gone at its
			// start and records the exit. (rm of a bound lease whose
			// process has exited reaches this point only while exit
			// tracking has not yet recorded the exit, a race; the kill
			// takes its lease out of tracking.)
			name: "release-marked", via: viaMount, setup: bindLive,
			op: mountOp(write("kill", "MNT/leases/held")...),
			check: func(t *testing.T, f *fixture, v *view) {
				if sig := reaped(t, f.proc); sig != syscall.SIGKILL {
					t.Errorf("the bound process ended by signal %v, want SIGKILL", sig)
				}
				wantLease(t, v, "held", g1, store.Exited)
				rmHeldSucceeds(t, f)
			},
		},
		{
			// Killed, verified gone, deleted: the two-step release of a
			// bound lease.
			name: "release-committed/bound", via: viaMount, setup: bindLive,
			op: func(t *testing.T, f *fixture, fp string) {
				f.released["held"] = true
				mountOp(write("kill", "MNT/generations/"+g1+"/leases/held")...)(t, f, fp)
			},
			check: func(t *testing.T, f *fixture, v *view) { wantNoLease(t, v, "held") },
		},
		{
			// The process exited while no daemon ran; the armed daemon
			// records the exit at its start and rm settles the lease.
			name: "release-committed/exited", via: viaMount, setup: bindExited,
			op:    release("held", "MNT/generations/"+g1+"/leases/held"),
			check: func(t *testing.T, f *fixture, v *view) { wantNoLease(t, v, "held") },
		},
		{
			// SIGKILL sent and the exit seen, the release not begun: the
			// lease stays bound, and the next daemon records the exit at
			// its start.
			name: "kill-signalled", via: viaMount, setup: bindLive,
			op: mountOp(write("kill", "MNT/leases/held")...),
			check: func(t *testing.T, f *fixture, v *view) {
				if sig := reaped(t, f.proc); sig != syscall.SIGKILL {
					t.Errorf("the bound process ended by signal %v, want SIGKILL", sig)
				}
				wantLease(t, v, "held", g1, store.Exited)
				rmHeldSucceeds(t, f)
			},
		},
	}...)
	rows = append(rows, exitScenarios()...)
	rows = append(rows, incomingScenarios()...)
	rows = append(rows, launchScenarios(mountOp, cancel)...)
	for i := range rows {
		rows[i].failpoint, _, _ = strings.Cut(rows[i].name, "/")
	}
	return rows
}

func TestCrash(t *testing.T) {
	harness.RequireFUSE(t)
	tmpl := template(t, t.TempDir())
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			f := tmpl.copyTemplate(t)
			if sc.setup != nil {
				sc.setup(t, f)
			}
			t.Logf("%s armed in %s", sc.failpoint, sc.via)
			sc.op(t, f, sc.failpoint)

			// The store as the crash left it; fsck must change nothing.
			payload, staging := f.storeEntries(t)
			if sc.fsckRefuses != "" {
				if r := harness.RunStatus(t, "fsck", f.store); r.Code == 0 || !strings.Contains(r.Stderr, sc.fsckRefuses) {
					t.Errorf("fsck right after the crash: %v, want a refusal saying %q", r, sc.fsckRefuses)
				}
			} else if got := f.fsckKinds(t); !slices.Equal(got, sc.before) {
				t.Errorf("fsck right after the crash found %q, want %q", got, sc.before)
			}
			if p, s := f.storeEntries(t); !slices.Equal(p, payload) || !slices.Equal(s, staging) {
				t.Errorf("fsck without --repair changed the store: payload %q -> %q, staging %q -> %q", payload, p, staging, s)
			}

			// Recover with a normal mount and look.
			d := f.mount(t)
			v := f.look(t)
			f.checkInvariants(t, v)
			if sc.check != nil {
				sc.check(t, f, v)
			}
			d.Stop()

			// No orphaned payload, no staging leftover.
			payload, staging = f.storeEntries(t)
			var shown []string
			for g := range v.gens {
				shown = append(shown, g)
			}
			sort.Strings(shown)
			if !slices.Equal(payload, shown) {
				t.Errorf("after recovery payload/ holds %q, the mount showed %q", payload, shown)
			}
			if len(staging) != 0 {
				t.Errorf("after recovery staging/ holds %q", staging)
			}
			if sc.after != nil {
				sc.after(t, f)
			}
			if got := f.fsckKinds(t, "--digests"); len(got) != 0 {
				t.Errorf("fsck --digests after recovery found %q", got)
			}
		})
	}
}

// failpointCall matches a fail point call and captures its argument (up
// to the first closing parenthesis); failpointStatic and failpointPrefix
// read a literal name and the literal prefix of a dynamic one from it.
var (
	failpointCall   = regexp.MustCompile(`\bfailpoint\(([^)]*)`)
	failpointStatic = regexp.MustCompile(`^"([^"]+)"$`)
	failpointPrefix = regexp.MustCompile(`^"([^"]+)"\s*\+`)
	failpointDoc    = regexp.MustCompile(`^[a-z]+(-[a-z<>]+)+$`)
)

// codeFailpoints reads every non-test Go file of store/ and returns the
// fail point names called with a literal and the prefixes of the dynamic
// ones. A call whose name it cannot read fails the test.
func codeFailpoints(t *testing.T) (names, prefixes []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(harness.ModuleRoot(t), "store", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "//") || strings.HasPrefix(trimmed, "func failpoint(") {
				continue
			}
			for _, call := range failpointCall.FindAllStringSubmatch(line, -1) {
				arg := strings.TrimSpace(call[1])
				if m := failpointStatic.FindStringSubmatch(arg); m != nil {
					names = append(names, m[1])
				} else if m := failpointPrefix.FindStringSubmatch(arg); m != nil {
					prefixes = append(prefixes, m[1])
				} else {
					t.Errorf("%s:%d: cannot read the fail point name in %q", filepath.Base(file), i+1, strings.TrimSpace(line))
				}
			}
		}
	}
	return names, prefixes
}

// TestFailpointTable checks that TestCrash covers every fail point the
// store code has, and nothing else, and that failpoint.go's list of names
// agrees with the code.
func TestFailpointTable(t *testing.T) {
	names, prefixes := codeFailpoints(t)
	if len(names) == 0 {
		t.Fatal("found no fail point calls in store/")
	}
	inCode := map[string]bool{}
	documented := map[string]bool{}
	for _, n := range names {
		inCode[n], documented[n] = true, true
	}
	for _, p := range prefixes {
		if p == pullMidwayPrefix {
			documented[p+"<artifact>"] = true
			continue
		}
		if p != copiedPrefix {
			t.Errorf("dynamic fail point %q+...: the crash table cannot enumerate its names", p)
			continue
		}
		documented[p+"<artifact>"] = true
		for _, a := range copiedArtifacts {
			inCode[p+a] = true
		}
	}
	inTable := map[string]bool{}
	for _, sc := range scenarios() {
		inTable[sc.failpoint] = true
	}
	for n := range inCode {
		if !inTable[n] {
			t.Errorf("fail point %q is in store/ but TestCrash has no row for it", n)
		}
	}
	for n := range inTable {
		if !inCode[n] {
			t.Errorf("TestCrash has a row for fail point %q, which store/ no longer has", n)
		}
	}

	src, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "store", "failpoint.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, doc, ok := strings.Cut(string(src), "Names in use:")
	doc, _, _ = strings.Cut(doc, "const FailpointEnv")
	if !ok {
		t.Fatal("store/failpoint.go has no \"Names in use:\" list")
	}
	inDoc := map[string]bool{}
	for _, word := range strings.FieldsFunc(doc, func(r rune) bool { return strings.ContainsRune(" \t\n/,.()", r) }) {
		if failpointDoc.MatchString(word) {
			inDoc[word] = true
		}
	}
	for n := range documented {
		if !inDoc[n] {
			t.Errorf("fail point %q is not in store/failpoint.go's list of names", n)
		}
	}
	for n := range inDoc {
		if !documented[n] {
			t.Errorf("store/failpoint.go lists fail point %q, which the code does not have", n)
		}
	}
}
