//go:build linux

package conformance

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"templatefs/internal/capturetest"
	"templatefs/internal/hostclock"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// testIncoming publishes a capture through incoming/ with real tools:
// mkdir, cp --sparse=always, echo publish > ctl, cat status, ls, cmp, and
// checks that holes are kept and that every refusal (no class.json, a bad
// one, a missing artifact, a hard-linked one, a file open for writing, a
// second publish, a bad name) leaves the store as it was and uses up no
// generation ID, and is logged with its reason once.
func testIncoming(t *testing.T, b Backend) {
	e := newEnv(t, b)
	classFile := filepath.Join(t.TempDir(), "class.json")
	class, err := json.Marshal(templatekey.SampleClass())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(classFile, class, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %q: %v: %s", name, args, err, out)
		}
	}
	publish := func(dir string) error {
		return os.WriteFile(e.path(dir+"/ctl"), []byte("publish\n"), 0o644)
	}
	status := func(dir string) string {
		t.Helper()
		data, err := os.ReadFile(e.path(dir + "/status"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	refused := func(what, dir string, want syscall.Errno) {
		t.Helper()
		before := e.storeState()
		wantErrno(t, what, publish(dir), want)
		if s := status(dir); !strings.HasPrefix(s, "refused "+errnoName(want)+": ") {
			t.Errorf("%s: status %q, want a refusal with %s", what, s, errnoName(want))
		}
		if after := e.storeState(); after != before {
			t.Errorf("%s changed the store:\n%s\n%s", what, before, after)
		}
	}

	wantErrno(t, "mkdir incoming/.bad", os.Mkdir(e.path("incoming/.bad"), 0o755), syscall.EINVAL)
	wantErrno(t, "mkdir generations/x", os.Mkdir(e.path("generations/x"), 0o755), syscall.EPERM)
	const dir = "incoming/cap1"
	run("mkdir", e.path(dir))
	wantErrno(t, "mkdir of an existing incoming directory", os.Mkdir(e.path(dir), 0o755), syscall.EEXIST)
	if st := e.lstat(dir); st.Mode != syscall.S_IFDIR|0o700 {
		t.Errorf("%s mode %#o, want a 0700 directory", dir, st.Mode)
	}
	if got := e.names(dir); !slices.Equal(got, []string{"ctl", "status"}) {
		t.Errorf("new incoming directory lists %q, want ctl and status", got)
	}
	if s := status(dir); s != "open\n" {
		t.Errorf("status of a new incoming directory %q, want open", s)
	}
	artifacts := []string{"manifest.bin", "memory.bin", "state.bin"}
	var sources []string
	for _, a := range artifacts {
		sources = append(sources, filepath.Join(e.capture, a))
	}
	run("cp", append(append([]string{"--sparse=always"}, sources...), e.path(dir)+"/")...)
	refused("publish without class.json", dir, syscall.EINVAL)
	if err := os.WriteFile(e.path(dir+"/class.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("publish with a bad class.json", dir, syscall.EINVAL)
	run("cp", classFile, e.path(dir)+"/class.json")
	run("mv", e.path(dir+"/memory.bin"), e.path(dir+"/memory.tmp"))
	refused("publish with memory.bin missing", dir, syscall.EINVAL)
	run("mv", e.path(dir+"/memory.tmp"), e.path(dir+"/memory.bin"))
	w, err := os.OpenFile(e.path(dir+"/state.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	refused("publish while state.bin is open for writing", dir, syscall.EBUSY)
	w.Close()
	// A second name of an artifact, made on the store's disk (the mount
	// makes no links): a bad capture, refused before an ID is reserved.
	backing := filepath.Join(e.storeDir, "incoming", "cap1", "capture", "state.bin")
	if err := os.Link(backing, backing+".other"); err != nil {
		t.Fatal(err)
	}
	refused("publish with a hard-linked state.bin", dir, syscall.EINVAL)
	if s := status(dir); !strings.Contains(s, "state.bin has 2 hard links") {
		t.Errorf("status %q, want the reason naming state.bin and its 2 links", s)
	}
	if err := os.Remove(backing + ".other"); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(e.log.String(), "\n") {
		if strings.Count(line, "publish incoming cap1:") > 1 {
			t.Errorf("refusal logged with a repeated prefix: %s", line)
		}
	}

	// The copy kept its holes, and SEEK_DATA finds the data.
	var src syscall.Stat_t
	if err := syscall.Stat(filepath.Join(e.capture, "memory.bin"), &src); err != nil {
		t.Fatal(err)
	}
	st := e.lstat(dir + "/memory.bin")
	if st.Size != src.Size || st.Blocks*512 >= st.Size/16 {
		t.Errorf("incoming memory.bin: %d bytes in %d blocks, want %d bytes, sparse", st.Size, st.Blocks, src.Size)
	}
	if !b.NoSeekData {
		f, err := os.Open(e.path(dir + "/memory.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if off, err := unix.Seek(int(f.Fd()), 4096, unix.SEEK_DATA); err != nil || off <= 4096 {
			t.Errorf("lseek(4096, SEEK_DATA) on incoming memory.bin = %d, %v; want the next data block", off, err)
		}
		f.Close()
	}

	run("sh", "-c", `echo publish > "$1"`, "sh", e.path(dir+"/ctl"))
	gen := "g000004"
	if s := status(dir); s != "published "+gen+"\n" {
		t.Fatalf("status after publish %q, want published %s", s, gen)
	}
	if got := e.names("generations"); !slices.Contains(got, gen) {
		t.Errorf("generations lists %q, want %s", got, gen)
	}
	for _, a := range artifacts {
		run("cmp", filepath.Join(e.capture, a), e.path("generations/"+gen+"/payload/"+a))
	}
	if st := e.lstat("generations/" + gen + "/payload/memory.bin"); st.Blocks*512 >= st.Size/16 {
		t.Errorf("published memory.bin: %d blocks for %d bytes, want sparse", st.Blocks, st.Size)
	}
	if got := e.names(dir); !slices.Equal(got, []string{"ctl", "status"}) {
		t.Errorf("published incoming directory lists %q, want only ctl and status", got)
	}
	before := e.storeState()
	wantErrno(t, "a second publish", publish(dir), syscall.EINVAL)
	if s := status(dir); s != "published "+gen+"\n" {
		t.Errorf("status after a second publish %q, want still published %s", s, gen)
	}
	if log := e.log.String(); !strings.Contains(log, "already published as "+gen) {
		t.Errorf("second publish: no refusal naming %s logged:\n%s", gen, log)
	}
	if after := e.storeState(); after != before {
		t.Errorf("a second publish changed the store:\n%s\n%s", before, after)
	}
	run("rmdir", e.path(dir))
	if got := e.names("incoming"); len(got) != 0 {
		t.Errorf("incoming lists %q after rmdir", got)
	}

	// rmdir refuses a directory with files; rm -r empties and removes it.
	// A file renamed within the directory keeps its inode and content.
	run("mkdir", e.path("incoming/cap2"))
	run("cp", "--sparse=always", filepath.Join(e.capture, "state.bin"), e.path("incoming/cap2/a"))
	ino := e.lstat("incoming/cap2/a").Ino
	run("mv", e.path("incoming/cap2/a"), e.path("incoming/cap2/b"))
	if got := e.lstat("incoming/cap2/b").Ino; got != ino {
		t.Errorf("inode %#x after mv, was %#x", got, ino)
	}
	run("cmp", filepath.Join(e.capture, "state.bin"), e.path("incoming/cap2/b"))
	wantErrno(t, "mv out of the incoming directory", os.Rename(e.path("incoming/cap2/b"), e.path("leases/b")), syscall.EPERM)
	wantErrno(t, "rmdir of a directory with files", syscall.Rmdir(e.path("incoming/cap2")), syscall.ENOTEMPTY)
	run("truncate", "-s", "10", e.path("incoming/cap2/b"))
	if st := e.lstat("incoming/cap2/b"); st.Size != 10 {
		t.Errorf("size %d after truncate -s 10", st.Size)
	}
	run("rm", "-r", e.path("incoming/cap2"))

	// What an incoming directory holds survives a restart.
	run("mkdir", e.path("incoming/cap3"))
	run("cp", filepath.Join(e.capture, "state.bin"), e.path("incoming/cap3/state.bin"))
	mnt := e.mnt
	e.unmount()
	e.mount(mnt)
	if got := e.names("incoming/cap3"); !slices.Equal(got, []string{"ctl", "state.bin", "status"}) {
		t.Errorf("incoming/cap3 after a remount lists %q", got)
	}
	run("cmp", filepath.Join(e.capture, "state.bin"), e.path("incoming/cap3/state.bin"))
}

// testIncomingPublishRace: a `publish` while a publication of the same
// directory runs (a 4 GiB sparse memory.bin takes seconds to hash) fails
// at once with EBUSY, from the open of ctl, and changes nothing; the first
// publication succeeds and status names its generation.
func testIncomingPublishRace(t *testing.T, b Backend) {
	e := newEnv(t, b)
	o := manifest.SampleOptions{StateSizeBytes: 100_000, MemorySizeBytes: 4 << 30, CaptureUTC: hostclock.Now()}
	capture := capturetest.Make(t, t.TempDir(), o)
	class, err := json.Marshal(templatekey.SampleClass())
	if err != nil {
		t.Fatal(err)
	}
	const dir = "incoming/race"
	if err := os.Mkdir(e.path(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.path(dir+"/class.json"), class, 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(capture)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range entries {
		if out, err := exec.Command("cp", "--sparse=always", filepath.Join(capture, a.Name()), e.path(dir)+"/").CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v: %s", a.Name(), err, out)
		}
	}
	status := func() string {
		t.Helper()
		data, err := os.ReadFile(e.path(dir + "/status"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	early, err := os.OpenFile(e.path(dir+"/ctl"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	first := exec.Command("sh", "-c", `echo publish > "$1"`, "sh", e.path(dir+"/ctl"))
	var firstOut strings.Builder
	first.Stdout, first.Stderr = &firstOut, &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for status() != "publishing\n" {
		if time.Now().After(deadline) {
			t.Fatalf("status %q, never publishing", status())
		}
		time.Sleep(time.Millisecond)
	}
	before := e.storeState()
	second := exec.Command("sh", "-c", `echo publish > "$1"`, "sh", e.path(dir+"/ctl"))
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "busy") {
		t.Errorf("second publish during a publication: %v: %s; want EBUSY; log:\n%s", err, out, e.log.String())
	}
	if after := e.storeState(); after != before {
		t.Errorf("the second publish changed the store:\n%s\n%s", before, after)
	}
	_, earlyErr := early.Write([]byte("publish\n"))
	t.Logf("publish through a ctl descriptor opened before the publication: %v", earlyErr)
	if err := first.Wait(); err != nil {
		t.Fatalf("first publish: %v: %s", err, firstOut.String())
	}
	if s := status(); s != "published g000004\n" {
		t.Errorf("status after the first publication %q, want published g000004", s)
	}
	if got := e.names("generations"); !slices.Contains(got, "g000004") {
		t.Errorf("generations lists %q, want g000004", got)
	}
	// A ctl descriptor opened before the publication: its write came
	// after it (the kernel serializes writes to one file), or during it.
	if !errors.Is(earlyErr, syscall.EINVAL) && !errors.Is(earlyErr, syscall.EBUSY) {
		t.Errorf("publish through a ctl descriptor opened before the publication: %v, want EINVAL (already published) or EBUSY", earlyErr)
	}
	if s := status(); s != "published g000004\n" {
		t.Errorf("status after a refused publish %q, want still published g000004", s)
	}
}

// testIncomingOtherUser: another uid may list incoming/ but not make,
// fill, publish or remove an incoming directory, and nothing changes.
func testIncomingOtherUser(t *testing.T, b Backend) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run tools as another uid")
	}
	e := newEnvWith(t, b, MountOptions{AllowOther: true}, traversableDir(t))
	if err := os.Mkdir(e.path("incoming/mine"), 0o700); err != nil {
		t.Fatal(err)
	}
	before := e.storeState()
	if out, err := asNobody("ls", e.path("incoming")); err != nil {
		t.Errorf("ls incoming as uid %d: %v: %s", nobody, err, out)
	}
	for _, args := range [][]string{
		{"mkdir", e.path("incoming/theirs")},
		{"touch", e.path("incoming/mine/memory.bin")},
		{"sh", "-c", `echo publish > "$1"`, "sh", e.path("incoming/mine/ctl")},
		{"rmdir", e.path("incoming/mine")},
	} {
		if out, err := asNobody(args[0], args[1:]...); err == nil || !strings.Contains(out, "ermission denied") {
			t.Errorf("%q as uid %d: %v: %s; want EACCES", args, nobody, err, out)
		}
	}
	if got := e.names("incoming"); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("incoming lists %q, want only mine", got)
	}
	if got := e.names("incoming/mine"); !slices.Equal(got, []string{"ctl", "status"}) {
		t.Errorf("incoming/mine lists %q", got)
	}
	if after := e.storeState(); after != before {
		t.Errorf("another uid changed the store:\n%s\n%s", before, after)
	}
}

// errnoName is the name of errno as status shows it, e.g. "EINVAL".
func errnoName(errno syscall.Errno) string {
	switch errno {
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.EBUSY:
		return "EBUSY"
	}
	return errno.Error()
}
