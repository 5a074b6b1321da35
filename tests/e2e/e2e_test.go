//go:build linux

// Package e2e drives the real templatefs binary and a real FUSE mount with
// ordinary tools (ls, cat, cmp, du, touch, mv, tar, rsync, find), as an
// operator or a backup job would: the "done when" as tests.
package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"templatefs/tests/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// session is a store, a sample capture and a mountpoint in a test's
// temporary directory.
type session struct {
	dir, store, capture, class, mnt string
}

// newSession runs `templatefs init` and `templatefs sample-capture` with
// the given extra flags.
func newSession(t *testing.T, sampleFlags ...string) *session {
	t.Helper()
	dir := t.TempDir()
	s := &session{
		dir:     dir,
		store:   filepath.Join(dir, "store"),
		capture: filepath.Join(dir, "cap", "capture"),
		class:   filepath.Join(dir, "cap", "class.json"),
		mnt:     filepath.Join(dir, "mnt"),
	}
	if err := os.Mkdir(s.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	harness.Run(t, "init", s.store)
	harness.Run(t, append(append([]string{"sample-capture"}, sampleFlags...), filepath.Join(dir, "cap"))...)
	return s
}

// publish publishes the capture and returns the generation ID, the last
// line publish prints.
func (s *session) publish(t *testing.T) string {
	t.Helper()
	out := harness.Lines(harness.Run(t, "publish", s.store, s.capture, "--class", s.class))
	if len(out) == 0 {
		t.Fatal("publish printed nothing")
	}
	gen := out[len(out)-1]
	if !strings.HasPrefix(gen, "g") || len(gen) < 7 {
		t.Fatalf("publish's last line %q is not a generation ID", gen)
	}
	return gen
}

// path joins parts below the mountpoint.
func (s *session) path(parts ...string) string {
	return filepath.Join(append([]string{s.mnt}, parts...)...)
}

// captureFiles lists the capture's artifact names with ls.
func (s *session) captureFiles(t *testing.T) []string {
	t.Helper()
	return harness.Lines(harness.MustTool(t, "ls", s.capture))
}

// cmpPayload cmps every capture file with its copy in dir.
func (s *session) cmpPayload(t *testing.T, dir string) {
	t.Helper()
	for _, name := range s.captureFiles(t) {
		if r := harness.Tool(t, "cmp", filepath.Join(s.capture, name), filepath.Join(dir, name)); r.Code != 0 {
			t.Errorf("cmp %s: %s%s", name, r.Stdout, r.Stderr)
		}
	}
}

// fsckClean runs `templatefs fsck --digests` and fails the test unless it
// exits 0 with nothing to report.
func (s *session) fsckClean(t *testing.T) {
	t.Helper()
	if r := harness.RunStatus(t, "fsck", "--digests", s.store); r.Code != 0 || r.Stdout != "" {
		t.Errorf("fsck: stdout %q, %v", r.Stdout, r)
	}
}

// duBytes returns du's allocated and apparent sizes of path, in bytes.
func duBytes(t *testing.T, path string) (allocated, apparent int64) {
	t.Helper()
	parse := func(out string) int64 {
		f := strings.Fields(out)
		if len(f) < 1 {
			t.Fatalf("du printed %q", out)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("du printed %q: %v", out, err)
		}
		return n
	}
	return parse(harness.MustTool(t, "du", "-B1", path)), parse(harness.MustTool(t, "du", "-B1", "--apparent-size", path))
}

// requireSparse fails the test unless path is at most a quarter allocated
// and apparently size bytes long.
func requireSparse(t *testing.T, path string, size int64) {
	t.Helper()
	allocated, apparent := duBytes(t, path)
	if apparent != size {
		t.Errorf("du --apparent-size %s = %d, want %d", path, apparent, size)
	}
	if allocated > size/4 {
		t.Errorf("du %s = %d bytes allocated of %d: not sparse", path, allocated, size)
	}
}

// inodes maps every path below root (relative; "" is root itself) to its
// inode number, from find -printf %i (stat).
func inodes(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range harness.Lines(harness.MustTool(t, "find", root, "-printf", "%i %P\n")) {
		ino, p, _ := strings.Cut(l, " ")
		m[p] = ino
	}
	return m
}

// checkDirInodes checks that readdir's d_ino, as ls -ai shows it, equals
// stat's st_ino (want, from inodes) for every entry of every directory.
func checkDirInodes(t *testing.T, root string, want map[string]string) {
	t.Helper()
	for p := range want {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() {
			continue
		}
		for _, l := range harness.Lines(harness.MustTool(t, "ls", "-ai1", filepath.Join(root, p))) {
			ino, name, _ := strings.Cut(strings.TrimSpace(l), " ")
			if name == "." || name == ".." {
				continue
			}
			if rel := filepath.Join(p, name); want[rel] != ino {
				t.Errorf("ls -i shows %s with inode %s, stat says %s", rel, ino, want[rel])
			}
		}
	}
}

const gib = 1 << 30

// TestSession is the "done when": a 1 GiB sample capture is
// published and served, and ls, cmp, du, touch, cat, mv, tar and rsync
// behave as the README session shows; inode numbers survive a restart.
func TestSession(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t, "--memory", "1GiB")
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt)

	if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations"))); !slices.Equal(got, []string{gen}) {
		t.Fatalf("ls generations = %q, want [%s]", got, gen)
	}
	payload := s.path("generations", gen, "payload")
	if got, want := harness.Lines(harness.MustTool(t, "ls", payload)), s.captureFiles(t); !slices.Equal(got, want) {
		t.Errorf("ls payload = %q, want the capture's %q", got, want)
	}
	s.cmpPayload(t, payload)
	requireSparse(t, filepath.Join(payload, "memory.bin"), gib)

	t.Run("lease", func(t *testing.T) {
		harness.MustTool(t, "touch", s.path("generations", gen, "leases", "clone-1"))
		for _, dir := range []string{s.path("leases"), s.path("generations", gen, "leases")} {
			if got := harness.Lines(harness.MustTool(t, "ls", dir)); !slices.Equal(got, []string{"clone-1"}) {
				t.Errorf("ls %s = %q, want [clone-1]", dir, got)
			}
		}
		var lease struct {
			CloneID    string `json:"clone_id"`
			Generation string `json:"store_generation"`
			State      string `json:"state"`
		}
		out := harness.MustTool(t, "cat", s.path("leases", "clone-1"))
		if err := json.Unmarshal([]byte(out), &lease); err != nil {
			t.Fatalf("cat leases/clone-1 = %q: not JSON: %v", out, err)
		}
		if lease.CloneID != "clone-1" || lease.Generation != gen || lease.State != "reserved" {
			t.Errorf("lease = %+v, want clone-1 on %s, reserved", lease, gen)
		}
	})

	t.Run("tar", func(t *testing.T) {
		archive, out := filepath.Join(s.dir, "payload.tar"), filepath.Join(s.dir, "untar")
		harness.MustTool(t, "tar", "--sparse", "-cf", archive, "-C", filepath.Dir(payload), "payload")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		harness.MustTool(t, "tar", "-xf", archive, "-C", out)
		s.cmpPayload(t, filepath.Join(out, "payload"))
		requireSparse(t, filepath.Join(out, "payload", "memory.bin"), gib)
		if allocated, _ := duBytes(t, archive); allocated > gib/4 {
			t.Errorf("tar --sparse archive takes %d bytes", allocated)
		}
	})

	t.Run("rsync", func(t *testing.T) {
		out := filepath.Join(s.dir, "rsync")
		harness.MustTool(t, "rsync", "-a", s.path("generations")+"/", out+"/")
		s.cmpPayload(t, filepath.Join(out, gen, "payload"))
		if got := harness.Lines(harness.MustTool(t, "ls", filepath.Join(out, gen, "leases"))); !slices.Equal(got, []string{"clone-1"}) {
			t.Errorf("rsync copied leases %q, want [clone-1]", got)
		}
	})

	t.Run("tombstone", func(t *testing.T) {
		harness.MustTool(t, "mv", s.path("generations", gen), s.path("tombstones")+"/")
		if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations"))); len(got) != 0 {
			t.Errorf("ls generations after mv = %q, want nothing", got)
		}
		if got := harness.Lines(harness.MustTool(t, "ls", s.path("tombstones"))); !slices.Equal(got, []string{gen}) {
			t.Errorf("ls tombstones after mv = %q, want [%s]", got, gen)
		}
		r := harness.Tool(t, "touch", s.path("tombstones", gen, "leases", "clone-2"))
		if r.Code == 0 || !strings.Contains(r.Stderr, "Operation not permitted") {
			t.Errorf("touch of a lease on a tombstoned generation: %v; want a failure with EPERM", r)
		}
		if _, err := os.Lstat(s.path("leases", "clone-2")); err == nil {
			t.Error("the refused lease clone-2 exists")
		}
		if out := harness.MustTool(t, "cat", s.path("leases", "clone-1")); !strings.Contains(out, `"clone-1"`) {
			t.Errorf("granted lease after the tombstone: %q", out)
		}
		s.cmpPayload(t, s.path("tombstones", gen, "payload"))
	})

	// Inode numbers, from stat and from readdir, are the same after the
	// daemon restarts (in the parent test: the new daemon outlives this
	// step).
	before := inodes(t, s.mnt)
	for _, p := range []string{"", "store", filepath.Join("tombstones", gen, "payload", "memory.bin"), filepath.Join("leases", "clone-1")} {
		if before[p] == "" {
			t.Fatalf("find did not list %q: %v", p, before)
		}
	}
	checkDirInodes(t, s.mnt, before)
	d.Stop()
	d = harness.StartMount(t, s.store, s.mnt)
	after := inodes(t, s.mnt)
	for p, ino := range before {
		if after[p] != ino {
			t.Errorf("%s: inode %s before the restart, %s after", p, ino, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared after the restart", p)
		}
	}
	d.Stop()
	s.fsckClean(t)
}

// TestVersion5 publishes and mounts a version 5 capture.
func TestVersion5(t *testing.T) {
	harness.RequireFUSE(t)
	s := newSession(t, "--version", "5", "--memory", "64MiB")
	gen := s.publish(t)
	d := harness.StartMount(t, s.store, s.mnt)
	if got := harness.Lines(harness.MustTool(t, "ls", s.path("generations"))); !slices.Equal(got, []string{gen}) {
		t.Fatalf("ls generations = %q, want [%s]", got, gen)
	}
	if m := harness.MustTool(t, "cat", s.path("generations", gen, "manifest")); !strings.HasPrefix(m, "version: 5\n") {
		t.Errorf("manifest starts %q, want version: 5", m[:min(len(m), 40)])
	}
	s.cmpPayload(t, s.path("generations", gen, "payload"))
	harness.MustTool(t, "touch", s.path("generations", gen, "leases", "v5-clone"))
	d.Stop()
	s.fsckClean(t)
}

// TestDemo runs `templatefs demo`, lists its mount and interrupts it.
func TestDemo(t *testing.T) {
	harness.RequireFUSE(t)
	tmp := t.TempDir()
	cmd := harness.Command(t, "demo")
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp) // the demo's directory goes there
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(tmp, "demo.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mnt := make(chan string, 1)
	waited := make(chan struct{})
	var waitErr error
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "mountpoint:"); ok {
				mnt <- strings.TrimSpace(p)
			}
		}
		close(mnt)
		waitErr = cmd.Wait()
		close(waited)
	}()
	var mountpoint string
	t.Cleanup(func() {
		select {
		case <-waited:
		default:
			cmd.Process.Kill()
			<-waited
		}
		if mountpoint != "" {
			harness.Unmount(t, mountpoint)
		}
	})
	select {
	case p, ok := <-mnt:
		if !ok {
			<-waited
			t.Fatalf("demo ended without printing its mountpoint: %v\n%s", waitErr, log())
		}
		mountpoint = p
	case <-time.After(time.Minute):
		t.Fatalf("demo printed no mountpoint within a minute\n%s", log())
	}
	if got := harness.MountType(t, mountpoint); got != harness.FSType {
		t.Fatalf("demo printed mountpoint %s, mounted as %q, want %s", mountpoint, got, harness.FSType)
	}
	if !strings.HasPrefix(mountpoint, tmp) {
		t.Errorf("demo mountpoint %s is not below TMPDIR %s", mountpoint, tmp)
	}
	if got := harness.Lines(harness.MustTool(t, "ls", filepath.Join(mountpoint, "generations"))); !slices.Equal(got, []string{"g000001", "g000002"}) {
		t.Errorf("ls generations = %q, want [g000001 g000002]", got)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
		if waitErr != nil {
			t.Errorf("demo after SIGINT: %v\n%s", waitErr, log())
		}
	case <-time.After(harness.StopTimeout):
		t.Fatalf("demo still running %v after SIGINT\n%s", harness.StopTimeout, log())
	}
	if harness.IsMounted(t, mountpoint) {
		t.Errorf("demo exited and left %s mounted", mountpoint)
	}
}

// TestUsageErrors checks that a bad command line exits with status 2.
func TestUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, r := range []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"publish without arguments", []string{"publish"}},
		{"publish without capture", []string{"publish", out}},
		{"publish without class", []string{"publish", out, out}},
		{"memory not a size", []string{"sample-capture", "--memory", "lots", out}},
		{"memory in decimal units", []string{"sample-capture", "--memory", "1GB", out}},
		{"memory not page-aligned", []string{"sample-capture", "--memory", "1000", out}},
		{"memory zero", []string{"sample-capture", "--memory", "0", out}},
		{"bad version", []string{"sample-capture", "--version", "4", out}},
	} {
		t.Run(r.name, func(t *testing.T) {
			res := harness.RunStatus(t, r.args...)
			if res.Code != 2 {
				t.Errorf("templatefs %q: %v; want exit 2", r.args, res)
			}
			if !strings.Contains(res.Stderr, "usage") {
				t.Errorf("templatefs %q: stderr has no usage:\n%s", r.args, res.Stderr)
			}
		})
	}
	if _, err := os.Lstat(out); err == nil {
		t.Errorf("a refused command created %s", out)
	}
}

// TestRefusedPublish adds a file the manifest does not list to a capture:
// publish exits 1 naming it, and the store stays clean.
func TestRefusedPublish(t *testing.T) {
	s := newSession(t, "--memory", "16MiB")
	if err := os.WriteFile(filepath.Join(s.capture, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := harness.RunStatus(t, "publish", s.store, s.capture, "--class", s.class)
	if r.Code != 1 || !strings.Contains(r.Stderr, "notes.txt") {
		t.Errorf("publish of a capture with an extra file: %v; want exit 1 naming notes.txt", r)
	}
	if strings.Contains(r.Stdout, "g0") {
		t.Errorf("refused publish printed a generation: %q", r.Stdout)
	}
	s.fsckClean(t)
	if err := os.Remove(filepath.Join(s.capture, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	s.publish(t)
	s.fsckClean(t)
}
