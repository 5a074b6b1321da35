//go:build linux

package crash

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/tests/harness"
)

// deathTimeout bounds the wait for an armed process to reach its fail
// point and die.
const deathTimeout = 10 * time.Second

// fixture is one crash scenario's store, copied from the shared template
// (g000001 published from the sample capture, lease "held" on it), and
// what the scenario knows about it.
type fixture struct {
	store, mnt string
	// captures maps each generation the scenario published, or may
	// have, to the capture it came from.
	captures map[string]string
	// acked holds every lease whose creation returned success, with its
	// generation; released holds those the scenario released since (or
	// tried to: the kill may have come before or after the commit).
	acked    map[string]string
	released map[string]bool
	// proc is a process a scenario binds a lease to (sleeper).
	proc *exec.Cmd
	// launch is the launch ID of "held", once a scenario read it
	// (readLaunch).
	launch string
	// sample and scratch are captures the scenario may publish; key is
	// the sample capture's key ID.
	sample, scratch, class, key string
}

// path joins parts below the mountpoint.
func (f *fixture) path(parts ...string) string {
	return filepath.Join(append([]string{f.mnt}, parts...)...)
}

// mount serves the store with no fail point armed.
func (f *fixture) mount(t *testing.T) *harness.Daemon {
	t.Helper()
	return harness.StartMount(t, f.store, f.mnt)
}

// armed returns env with fail point fp armed (store.FailpointEnv).
func armed(env []string, fp string) []string {
	return append(env, store.FailpointEnv+"="+fp)
}

// mountArmed serves the store with fail point fp armed.
func (f *fixture) mountArmed(t *testing.T, fp string) *harness.Daemon {
	t.Helper()
	cmd := harness.Command(t, "mount", f.store, f.mnt)
	cmd.Env = armed(cmd.Env, fp)
	return harness.StartDaemon(t, cmd, f.mnt)
}

// throughMount runs the tool op against a daemon with fail point fp armed
// and checks that the daemon died of SIGKILL and that op was not
// acknowledged (it failed: the kernel aborts requests of a dead server).
// The dead mount is detached.
func (f *fixture) throughMount(t *testing.T, fp string, op ...string) {
	t.Helper()
	d := f.mountArmed(t, fp)
	r := harness.Tool(t, op[0], op[1:]...)
	t.Logf("%q against the armed daemon: %v", op, r)
	died := d.Wait(deathTimeout)
	d.Detach()
	if !died.Killed() {
		t.Fatalf("daemon with %s armed, after %q: %v; want killed by SIGKILL", fp, op, died)
	}
	if r.Code == 0 {
		t.Errorf("%q succeeded although the daemon died during it", op)
	}
}

// cliArmed runs templatefs args with fail point fp armed and checks that
// it died of SIGKILL.
func (f *fixture) cliArmed(t *testing.T, fp string, args ...string) {
	t.Helper()
	cmd := harness.Command(t, args...)
	cmd.Env = armed(cmd.Env, fp)
	if r := harness.Exec(t, cmd); !r.Killed() {
		t.Fatalf("templatefs %q with %s armed: %v; want killed by SIGKILL", args, fp, r)
	}
}

// publish publishes capture with the CLI and returns the generation ID.
func (f *fixture) publish(t *testing.T, capture string) string {
	t.Helper()
	out := harness.Lines(harness.Run(t, "publish", "--duplicate", f.store, capture, "--class", f.class))
	gen := out[len(out)-1]
	f.captures[gen] = capture
	if key, ok := strings.CutPrefix(out[0], "key "); ok && capture == f.sample {
		f.key = key
	}
	return gen
}

// expand replaces, in each argument of op, a leading "MNT/" with the
// mountpoint, "{key}" with the sample capture's key ID, "{pid}" with
// the pid of f.proc and "{launch}" with f.launch.
func (f *fixture) expand(op []string) []string {
	out := make([]string, len(op))
	for i, a := range op {
		if rel, ok := strings.CutPrefix(a, "MNT/"); ok {
			a = f.path(rel)
		}
		a = strings.ReplaceAll(a, "{key}", f.key)
		a = strings.ReplaceAll(a, "{launch}", f.launch)
		if f.proc != nil {
			a = strings.ReplaceAll(a, "{pid}", strconv.Itoa(f.proc.Process.Pid))
		}
		out[i] = a
	}
	return out
}

// tree runs the tool op (expanded) against a mount of its own, unarmed,
// and fails the test unless it succeeds.
func (f *fixture) tree(t *testing.T, op ...string) {
	t.Helper()
	d := f.mount(t)
	op = f.expand(op)
	harness.MustTool(t, op[0], op[1:]...)
	d.Stop()
}

// bindExited binds lease clone, through the mount (`pid N`), to a
// process that then exits while no daemon runs, so that the next daemon
// finds it gone at its start.
func (f *fixture) bindExited(t *testing.T, clone string) {
	t.Helper()
	f.bindLive(t, clone)
	f.proc.Process.Kill()
	f.proc.Wait()
}

// bindLive binds lease clone, through the mount (`pid N`), to a new
// running process (f.proc).
func (f *fixture) bindLive(t *testing.T, clone string) {
	t.Helper()
	f.proc = harness.Sleeper(t)
	f.tree(t, write("pid {pid}", "MNT/leases/"+clone)...)
}

// dropIndexRow deletes the generation_leases row of clone under gen
// straight from the bbolt index (schema.go's layout), so that fsck finds
// lease-index-missing. The store must not be open.
func (f *fixture) dropIndexRow(t *testing.T, gen, clone string) {
	t.Helper()
	id, err := store.ParseGenerationID(gen)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(f.store, store.IndexFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("generation_leases")).Bucket(genKey(id)).Delete([]byte(clone))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// schemaV1 rewrites the closed store's index as schema version 1 wrote
// it: every lease as JSON (json.Marshal of store.Lease) in leases/,
// keyed by clone ID, with the lease sequence, no lease_records/ or
// tracked_leases/, and version 1.
func (f *fixture) schemaV1(t *testing.T) {
	t.Helper()
	st, err := store.Open(f.store, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := st.Leases()
	st.Close()
	if err != nil || len(leases) == 0 {
		t.Fatalf("leases of the template: %v, %v", leases, err)
	}
	db, err := bolt.Open(filepath.Join(f.store, store.IndexFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		old, err := tx.CreateBucket([]byte("leases"))
		if err != nil {
			return err
		}
		if err := old.SetSequence(tx.Bucket([]byte("lease_records")).Sequence()); err != nil {
			return err
		}
		for _, l := range leases {
			row, err := json.Marshal(l)
			if err != nil {
				return err
			}
			if err := old.Put([]byte(l.CloneID), row); err != nil {
				return err
			}
		}
		for _, b := range []string{"lease_records", "tracked_leases"} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("version"), binary.BigEndian.AppendUint32(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// genKey is the index key of a generation: its ID as 8 big-endian bytes.
func genKey(id store.GenerationID) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(id))
}

// fsckKinds runs `templatefs fsck` (read-only) and returns the kind of
// each problem it prints, checking that the exit status agrees.
func (f *fixture) fsckKinds(t *testing.T, extra ...string) []string {
	t.Helper()
	r := harness.RunStatus(t, append(append([]string{"fsck"}, extra...), f.store)...)
	var kinds []string
	for _, l := range harness.Lines(r.Stdout) {
		kind, _, _ := strings.Cut(l, " ")
		kinds = append(kinds, kind)
	}
	if want := map[bool]int{true: 0, false: 1}[len(kinds) == 0]; r.Code != want {
		t.Errorf("fsck printed %d problems and exited %d, want %d: %v", len(kinds), r.Code, want, r)
	}
	return kinds
}

// storeEntries lists payload/ and staging/ of the store directory.
func (f *fixture) storeEntries(t *testing.T) (payload, staging []string) {
	t.Helper()
	return harness.Lines(harness.MustTool(t, "ls", filepath.Join(f.store, store.PayloadDir))),
		harness.Lines(harness.MustTool(t, "ls", filepath.Join(f.store, store.StagingDir)))
}

// leaseFile is the part of a lease file (MNT/leases/<clone>) the checks
// read.
type leaseFile struct {
	CloneID    string `json:"clone_id"`
	LaunchID   string `json:"launch_id"`
	Generation string `json:"store_generation"`
	State      string `json:"state"`
	Process    *struct {
		PID int `json:"pid"`
	} `json:"process"`
}

// view is what a mount shows after recovery.
type view struct {
	gens   map[string]string // generation -> state (status file), from generations/, tombstones/ and retiring/
	leases map[string]leaseFile
}

// look reads the mount: every generation's state from its status file and
// every lease file. A generation listed in two directories, a status that
// disagrees with its directory, or a lease file that does not parse fails
// the test.
func (f *fixture) look(t *testing.T) *view {
	t.Helper()
	v := &view{gens: map[string]string{}, leases: map[string]leaseFile{}}
	for state, dir := range stateDirs {
		for _, gen := range harness.Lines(harness.MustTool(t, "ls", f.path(dir))) {
			if other, dup := v.gens[gen]; dup {
				t.Errorf("%s is under %s/ and %s/", gen, dir, stateDirs[store.GenerationState(other)])
			}
			first, _, _ := strings.Cut(harness.MustTool(t, "cat", f.path(dir, gen, "status")), "\n")
			got, ok := strings.CutPrefix(first, "state: ")
			if !ok {
				t.Fatalf("%s/%s/status starts %q, want state: ...", dir, gen, first)
			}
			if store.GenerationState(got) != state {
				t.Errorf("%s/%s has state %s", dir, gen, got)
			}
			v.gens[gen] = string(state)
		}
	}
	for _, clone := range harness.Lines(harness.MustTool(t, "ls", f.path("leases"))) {
		var l leaseFile
		out := harness.MustTool(t, "cat", f.path("leases", clone))
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("leases/%s = %q: %v", clone, out, err)
		}
		v.leases[clone] = l
	}
	return v
}

// stateDirs maps each generation state to the directory of the mount
// that lists generations in it.
var stateDirs = map[store.GenerationState]string{
	store.Published:  "generations",
	store.Tombstoned: "tombstones",
	store.Retiring:   "retiring",
}

// genDir is where gen appears in the mount.
func (v *view) genDir(gen string) string { return stateDirs[store.GenerationState(v.gens[gen])] }

// checkInvariants checks, on a recovered mount, the invariants every
// crash must keep: every lease names a generation the mount shows (none
// on a missing or retired one), every acknowledged lease not since
// released is still there on its generation, and every generation shown
// is complete and byte-identical to its capture (none half published, no
// payload deleted while leased).
func (f *fixture) checkInvariants(t *testing.T, v *view) {
	t.Helper()
	for clone, l := range v.leases {
		if _, ok := v.gens[l.Generation]; !ok {
			t.Errorf("lease %s is on %s, which the mount does not show", clone, l.Generation)
		}
		if l.CloneID != clone {
			t.Errorf("leases/%s holds the lease of %q", clone, l.CloneID)
		}
	}
	for clone, gen := range f.acked {
		if f.released[clone] {
			continue
		}
		if l, ok := v.leases[clone]; !ok || l.Generation != gen {
			t.Errorf("acknowledged lease %s on %s lost: the mount shows %+v", clone, gen, v.leases[clone])
		}
	}
	for gen := range v.gens {
		capture, ok := f.captures[gen]
		if !ok {
			t.Errorf("the mount shows %s, which was never published", gen)
			continue
		}
		payload := f.path(v.genDir(gen), gen, "payload")
		want := harness.Lines(harness.MustTool(t, "ls", capture))
		if got := harness.Lines(harness.MustTool(t, "ls", payload)); !slices.Equal(got, want) {
			t.Errorf("%s/payload lists %q, its capture %q", gen, got, want)
		}
		for _, name := range want {
			if r := harness.Tool(t, "cmp", filepath.Join(capture, name), filepath.Join(payload, name)); r.Code != 0 {
				t.Errorf("cmp %s of %s: %s%s", name, gen, r.Stdout, r.Stderr)
			}
		}
	}
}

// wantGens fails the test unless the mount shows exactly want
// (generation -> state).
func wantGens(t *testing.T, v *view, want map[string]store.GenerationState) {
	t.Helper()
	got := map[string]store.GenerationState{}
	for g, s := range v.gens {
		got[g] = store.GenerationState(s)
	}
	if len(got) != len(want) {
		t.Errorf("the mount shows generations %v, want %v", got, want)
		return
	}
	for g, s := range want {
		if got[g] != s {
			t.Errorf("the mount shows generations %v, want %v", got, want)
			return
		}
	}
}

// wantLease fails the test unless clone is leased on gen in state.
func wantLease(t *testing.T, v *view, clone, gen string, state store.LeaseState) leaseFile {
	t.Helper()
	l, ok := v.leases[clone]
	if !ok || l.Generation != gen || l.State != string(state) {
		t.Errorf("lease %s = %+v (present %v), want on %s in state %s", clone, l, ok, gen, state)
	}
	return l
}

// wantNoLease fails the test if clone is leased.
func wantNoLease(t *testing.T, v *view, clone string) {
	t.Helper()
	if l, ok := v.leases[clone]; ok {
		t.Errorf("lease %s still exists: %+v", clone, l)
	}
}

// writeScratchCapture writes, below dir, a valid capture that pairs a
// scratch.img (manifest workload-start tier, clone policy), which
// `templatefs sample-capture` does not make, and returns its path.
func writeScratchCapture(t *testing.T, dir string) string {
	t.Helper()
	host, err := store.ReadHostFacts()
	if err != nil {
		t.Fatal(err)
	}
	m := manifest.Sample(manifest.SampleOptions{
		Version: 6, MemorySizeBytes: 32 << 20, StateSizeBytes: 64 << 10, VPCount: 2,
		CaptureUTC: host.UTC, CaptureMonotonicNs: host.MonotonicNs,
		HostID: host.HostID, BootID: host.BootID, HostClock: host.HostClock,
	})
	identity := sha256.Sum256(nil)
	const scratchSize = 1 << 20
	m.Contract.SandboxBlocks = []manifest.SandboxBlock{
		{Role: "distro", ReadOnly: true, Length: 8 << 20, IdentityKind: "unbound", LogicalBlockSize: 512, PhysicalBlockSize: 512},
		{Role: "scratch", Length: scratchSize, IdentityKind: "sha256", Identity: identity[:], Artifact: manifest.ScratchFileName,
			LogicalBlockSize: 512, PhysicalBlockSize: 4096},
	}
	m.SnapshotTier, m.RestorePolicy, m.ConsumedConfigSections = "workload-start", "clone", 7
	if err := m.Validate(); err != nil {
		t.Fatalf("scratch capture manifest: %v", err)
	}
	capture := filepath.Join(dir, "scratch-capture")
	if err := os.Mkdir(capture, 0o700); err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte, size int64) {
		p := filepath.Join(capture, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
	encoded := manifest.Encode(m)
	put(manifest.ManifestFileName, encoded, int64(len(encoded)))
	put(manifest.StateFileName, random(int(m.StateSizeBytes)), int64(m.StateSizeBytes))
	put(manifest.MemoryFileName, random(1<<20), int64(m.MemorySizeBytes))
	put(manifest.ScratchFileName, random(scratchSize), scratchSize)
	return capture
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// template builds the store every scenario starts from, in dir: g000001
// published from a sample capture, and lease "held" on it acquired through
// a mount. It returns a fixture describing it (with no store of its own
// yet: see copyTemplate).
func template(t *testing.T, dir string) *fixture {
	t.Helper()
	f := &fixture{
		store:    filepath.Join(dir, "store"),
		mnt:      filepath.Join(dir, "mnt"),
		sample:   filepath.Join(dir, "cap", "capture"),
		class:    filepath.Join(dir, "cap", "class.json"),
		captures: map[string]string{},
		acked:    map[string]string{},
	}
	if err := os.Mkdir(f.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	harness.Run(t, "init", f.store)
	harness.Run(t, "sample-capture", "--memory", "128MiB", filepath.Join(dir, "cap"))
	f.scratch = writeScratchCapture(t, dir)
	if gen := f.publish(t, f.sample); gen != "g000001" {
		t.Fatalf("first publish made %s", gen)
	}
	f.tree(t, "touch", "MNT/generations/g000001/leases/held")
	f.acked["held"] = "g000001"
	return f
}

// copyTemplate gives a scenario its own copy of the template store (cp -a
// keeps memory.bin sparse) and mountpoint.
func (tmpl *fixture) copyTemplate(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		store: filepath.Join(dir, "store"), mnt: filepath.Join(dir, "mnt"),
		sample: tmpl.sample, scratch: tmpl.scratch, class: tmpl.class, key: tmpl.key,
		captures: maps.Clone(tmpl.captures), acked: maps.Clone(tmpl.acked), released: map[string]bool{},
	}
	harness.MustTool(t, "cp", "-a", tmpl.store, f.store)
	if err := os.Mkdir(f.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// reaped waits for p and returns the signal that ended it, or 0.
func reaped(t *testing.T, p *exec.Cmd) syscall.Signal {
	t.Helper()
	p.Wait()
	if ws, ok := p.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}
