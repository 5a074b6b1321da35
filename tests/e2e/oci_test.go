//go:build linux

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"templatefs/internal/ociartifact"
	"templatefs/store"
	"templatefs/tests/harness"
)

// registry is a real Debian docker-registry (distribution 2.8) serving
// plain HTTP on a loopback port, with its storage in a test directory.
type registry struct {
	addr, root string
	cmd        *exec.Cmd
}

// startRegistry starts docker-registry and waits until /v2/ answers; a
// cleanup stops it. DOCKER_CONFIG is pointed at an empty directory, so no
// credentials of the machine's are read.
func startRegistry(t *testing.T) *registry { return startRegistryWith(t, "") }

// startRegistryWith is startRegistry with more configuration (YAML at the
// top level, such as an auth section).
func startRegistryWith(t *testing.T, extra string) *registry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		harness.SkipOrFail(t, "docker-registry (Debian package docker-registry) not installed: %v", err)
	}
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	dir := t.TempDir()
	r := &registry{addr: freeAddr(t), root: filepath.Join(dir, "data")}
	config := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n%s", r.root, r.addr, extra)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "serve", cfgPath)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + r.addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return r
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("docker-registry on %s did not answer /v2/ within 30s: %v\n%s", r.addr, err, out)
		}
	}
}

// stop kills the registry and reaps it; it may be called again.
func (r *registry) stop() {
	if r.cmd.ProcessState == nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lastLine is the last line of out.
func lastLine(out string) string {
	lines := harness.Lines(out)
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// keyLine is the "key <id>" line publish and pull print.
func keyLine(t *testing.T, out string) string {
	t.Helper()
	for _, l := range harness.Lines(out) {
		if strings.HasPrefix(l, "key ") {
			return l
		}
	}
	t.Fatalf("no key line in %q", out)
	return ""
}

// cmpStores cmps every artifact of generation ga of store a with its copy
// in generation gb of store b, and requires b's memory.bin to be sparse.
func cmpStores(t *testing.T, a, ga, b, gb string, memory int64) {
	t.Helper()
	for _, name := range []string{"manifest.bin", "state.bin", "memory.bin"} {
		pa, pb := filepath.Join(a, "payload", ga, name), filepath.Join(b, "payload", gb, name)
		if r := harness.Tool(t, "cmp", pa, pb); r.Code != 0 {
			t.Errorf("cmp %s %s: %s%s", pa, pb, r.Stdout, r.Stderr)
		}
	}
	requireSparse(t, filepath.Join(b, "payload", gb, "memory.bin"), memory)
}

// TestPushPullRoundTrip pushes a generation with a 256 MiB sparse
// memory.bin to a real registry and pulls it into a second store: the
// artifacts are cmp-equal, memory.bin is sparse again, the key ID is the
// source's, the registry holds about the data, not the logical size; a
// second pull copies nothing and prints the same ID; both stores fsck
// clean.
func TestPushPullRoundTrip(t *testing.T) {
	reg := startRegistry(t)
	const memory = 256 << 20
	a := newSession(t, "--memory", "256MiB")
	published := harness.Run(t, "publish", a.store, a.capture, "--class", a.class)
	gen := lastLine(published)
	ref := reg.addr + "/templates/web:v1"
	pushed := harness.Run(t, "push", "--plain-http", a.store, gen, ref)
	if last := lastLine(pushed); !strings.HasPrefix(last, ref+"@sha256:") {
		t.Errorf("push's last line %q is not %s@sha256:…", last, ref)
	}
	if allocated, _ := duBytes(t, reg.root); allocated > memory/4 {
		t.Errorf("the registry holds %d bytes for a %d-byte sparse memory.bin: holes were uploaded", allocated, memory)
	}

	b := newSession(t)
	pulled := harness.Run(t, "pull", "--plain-http", ref, b.store)
	bgen := lastLine(pulled)
	if bgen != "g000001" {
		t.Fatalf("pull's last line %q, want g000001:\n%s", bgen, pulled)
	}
	if ka, kb := keyLine(t, published), keyLine(t, pulled); ka != kb {
		t.Errorf("key on the source %q, after the pull %q", ka, kb)
	}
	cmpStores(t, a.store, gen, b.store, bgen, memory)

	again := harness.Run(t, "pull", "--plain-http", ref, b.store)
	if lastLine(again) != bgen || !strings.Contains(again, "nothing copied") {
		t.Errorf("second pull printed %q; want \"nothing copied\" and %s last", again, bgen)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.store, "payload")); len(entries) != 1 {
		t.Errorf("payload/ holds %d generations after pulling the same one twice, want 1", len(entries))
	}
	if entries, _ := os.ReadDir(filepath.Join(b.store, store.IncomingDir)); len(entries) != 0 {
		t.Errorf("incoming/ keeps %v after the pull", entries)
	}
	a.fsckClean(t)
	b.fsckClean(t)
}

// TestPullResume kills a real pull with SIGKILL in the middle of
// memory.bin (fail point pull-midway-memory.bin): nothing is published and
// the store fscks clean; the next pull keeps manifest.bin and state.bin
// (the files saved, verified, before the kill become the payload: same
// inodes) and downloads only memory.bin.
func TestPullResume(t *testing.T) {
	reg := startRegistry(t)
	a := newSession(t, "--memory", "256MiB")
	gen := a.publish(t)
	ref := reg.addr + "/templates/resume:v1"
	harness.Run(t, "push", "--plain-http", a.store, gen, ref)

	b := newSession(t)
	cmd := harness.Command(t, "pull", "--plain-http", ref, b.store)
	cmd.Env = append(cmd.Env, store.FailpointEnv+"=pull-midway-memory.bin")
	if r := harness.Exec(t, cmd); !r.Killed() {
		t.Fatalf("pull with fail point pull-midway-memory.bin: %v; want killed", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.store, "payload")); len(entries) != 0 {
		t.Fatalf("a killed pull published %v", entries)
	}
	b.fsckClean(t)
	stages, err := filepath.Glob(filepath.Join(b.store, store.IncomingDir, "pull-*", store.IncomingCaptureDir))
	if err != nil || len(stages) != 1 {
		t.Fatalf("staging directories %v (%v), want one", stages, err)
	}
	kept := map[string]uint64{}
	for _, name := range []string{"manifest.bin", "state.bin"} {
		kept[name] = inodeOf(t, filepath.Join(stages[0], name))
	}
	if _, err := os.Lstat(filepath.Join(stages[0], "memory.bin")); err == nil {
		t.Fatal("memory.bin was saved although the pull was killed in the middle of it")
	}

	out := harness.Run(t, "pull", "--plain-http", ref, b.store)
	for _, want := range []string{"manifest.bin: kept", "state.bin: kept", "memory.bin: downloaded"} {
		if !strings.Contains(out, want) {
			t.Errorf("resumed pull lacks %q:\n%s", want, out)
		}
	}
	bgen := lastLine(out)
	for name, ino := range kept {
		if got := inodeOf(t, filepath.Join(b.store, "payload", bgen, name)); got != ino {
			t.Errorf("%s of the pulled generation is inode %d, not the one the killed pull saved (%d): it was copied again", name, got, ino)
		}
	}
	cmpStores(t, a.store, gen, b.store, bgen, 256<<20)
	b.fsckClean(t)
}

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestPullRegistryDown: a pull from a registry that is not running fails
// with a clear error and changes nothing; one through a proxy that drops
// the connection halfway through memory.bin's blob fails too, naming the
// artifact, publishes nothing and leaves a store that fscks clean; the
// pull straight from the registry then completes.
func TestPullRegistryDown(t *testing.T) {
	reg := startRegistry(t)
	a := newSession(t, "--memory", "256MiB")
	gen := a.publish(t)
	ref := "/templates/down:v1"
	harness.Run(t, "push", "--plain-http", a.store, gen, reg.addr+ref)

	b := newSession(t)
	down := freeAddr(t)
	r := harness.RunStatus(t, "pull", "--plain-http", down+ref, b.store)
	if r.Code != 1 || r.Stdout != "" || !strings.Contains(r.Stderr, "connection refused") {
		t.Errorf("pull from %s, where nothing listens: %v; want exit 1, nothing on stdout, connection refused", down, r)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.store, store.IncomingDir)); len(entries) != 0 {
		t.Errorf("a pull that reached no registry left %v", entries)
	}

	proxy := dropProxy(t, reg.addr, 2<<20) // memory.bin carries 4 MiB of data
	r = harness.RunStatus(t, "pull", "--plain-http", proxy+ref, b.store)
	if r.Code != 1 || !strings.Contains(r.Stderr, "download memory.bin") || strings.Contains(r.Stdout, "pulled") {
		t.Errorf("pull through a proxy that drops memory.bin's blob: %v\nstdout: %s\nwant exit 1 naming memory.bin", r, r.Stdout)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.store, "payload")); len(entries) != 0 {
		t.Errorf("a failed pull published %v", entries)
	}
	b.fsckClean(t)
	out := harness.Run(t, "pull", "--plain-http", reg.addr+ref, b.store)
	if !strings.Contains(out, "state.bin: kept") {
		t.Errorf("the pull after the failed one did not keep state.bin:\n%s", out)
	}
	cmpStores(t, a.store, gen, b.store, lastLine(out), 256<<20)
}

// dropProxy forwards loopback TCP connections to target and cuts every
// response body longer than limit bytes after limit bytes: a registry
// that goes away in the middle of a large blob. It returns its address.
func dropProxy(t *testing.T, target string, limit int64) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var cut atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				// A response of more than limit bytes is a layer blob
				// (manifests and configs are small): cut it.
				if n, _ := io.CopyN(c, up, limit); n == limit {
					cut.Add(1)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		if cut.Load() == 0 {
			t.Error("the proxy cut no response")
		}
	})
	return l.Addr().String()
}

// TestPushPullMounted pushes from a mounted store and pulls into another
// mounted store: both run through their daemons, the pulled generation
// shows in the mount under its source key ID at once, reads back equal
// through the mount, and grants a lease.
func TestPushPullMounted(t *testing.T) {
	harness.RequireFUSE(t)
	reg := startRegistry(t)
	a := newSession(t, "--memory", "64MiB")
	published := harness.Run(t, "publish", a.store, a.capture, "--class", a.class)
	gen := lastLine(published)
	harness.StartMount(t, a.store, a.mnt)
	ref := reg.addr + "/templates/mounted:v1"
	harness.Run(t, "push", "--plain-http", a.store, gen, ref)

	b := newSession(t)
	harness.StartMount(t, b.store, b.mnt)
	out := harness.Run(t, "pull", "--plain-http", ref, b.store)
	bgen := lastLine(out)
	key := strings.TrimPrefix(keyLine(t, published), "key ")
	if !strings.Contains(harness.MustTool(t, "ls", b.path("keys")), key) {
		t.Errorf("ls %s does not list the source key %s", b.path("keys"), key)
	}
	for _, name := range []string{"manifest.bin", "state.bin", "memory.bin"} {
		if r := harness.Tool(t, "cmp", a.path("generations", gen, "payload", name), b.path("generations", bgen, "payload", name)); r.Code != 0 {
			t.Errorf("cmp %s through the mounts: %s%s", name, r.Stdout, r.Stderr)
		}
	}
	// A clone on host B leases the pulled generation like a local one.
	harness.MustTool(t, "touch", b.path("generations", bgen, "leases", "clone-b"))
	if !strings.Contains(harness.MustTool(t, "ls", b.path("leases")), "clone-b") {
		t.Errorf("ls %s does not list the lease on the pulled generation", b.path("leases"))
	}
	b.fsckClean(t)
}

// retag pushes, under tag to, a copy of the generation artifact at from
// with its config and layers changed by edit, through oras-go as any
// registry client could: a hostile or broken registry's answer.
func retag(t *testing.T, from, to string, edit func(repo *remote.Repository, cfg *ociartifact.Config, layers []ocispec.Descriptor)) {
	t.Helper()
	ctx := context.Background()
	repo, tag, err := ociartifact.Repository(from, true, os.Getenv("DOCKER_CONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := ociartifact.Resolve(ctx, repo, tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, layers := src.Config, append([]ocispec.Descriptor(nil), src.Layers...)
	edit(repo, &cfg, layers)
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgDesc, err := oras.PushBytes(ctx, repo, ociartifact.ConfigMediaType, cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	m, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_0, "", oras.PackManifestOptions{ConfigDescriptor: &cfgDesc, Layers: layers})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Tag(ctx, m, to); err != nil {
		t.Fatal(err)
	}
}

// TestPullRefusesTampered pulls artifacts a registry serves wrong: a
// config whose memory.bin digest is not the data's (annotations agreeing,
// so only the hash before publication can tell), and a memory.bin layer
// that is not in the sparse encoding. Each pull fails naming the problem
// and publishes nothing; the refused memory.bin is never saved for a
// resume (the wrong digest discards that pull's staging); the store fscks
// clean and the honest tag still pulls.
func TestPullRefusesTampered(t *testing.T) {
	reg := startRegistry(t)
	a := newSession(t, "--memory", "64MiB")
	gen := a.publish(t)
	ref := reg.addr + "/templates/tampered"
	harness.Run(t, "push", "--plain-http", a.store, gen, ref+":v1")
	retag(t, ref+":v1", "digest", func(_ *remote.Repository, cfg *ociartifact.Config, layers []ocispec.Descriptor) {
		wrong := strings.Repeat("0", 64)
		cfg.Artifacts[2].SHA256 = wrong
		layers[2].Annotations = map[string]string{ociartifact.AnnotationTitle: "memory.bin", ociartifact.AnnotationSize: layers[2].Annotations[ociartifact.AnnotationSize], ociartifact.AnnotationSHA256: wrong}
	})
	retag(t, ref+":v1", "garbage", func(repo *remote.Repository, _ *ociartifact.Config, layers []ocispec.Descriptor) {
		blob := []byte(strings.Repeat("not a sparse artifact ", 100))
		d, err := oras.PushBytes(context.Background(), repo, ociartifact.LayerMediaType, blob)
		if err != nil {
			t.Fatal(err)
		}
		layers[2].Digest, layers[2].Size = d.Digest, d.Size
	})

	b := newSession(t)
	for tag, want := range map[string]string{
		"digest":  "pulled capture differs from the generation pushed: memory.bin",
		"garbage": "download memory.bin: malformed sparse artifact: magic",
	} {
		r := harness.RunStatus(t, "pull", "--plain-http", ref+":"+tag, b.store)
		if r.Code != 1 || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stdout, "pulled") {
			t.Errorf("pull of %s: %v\nstdout: %s\nwant exit 1 and %q", tag, r, r.Stdout, want)
		}
		if entries, _ := os.ReadDir(filepath.Join(b.store, "payload")); len(entries) != 0 {
			t.Errorf("pull of %s published %v", tag, entries)
		}
		b.fsckClean(t)
	}
	if stages, _ := filepath.Glob(filepath.Join(b.store, store.IncomingDir, "pull-*", store.IncomingCaptureDir, "memory.bin")); len(stages) != 0 {
		t.Errorf("a refused memory.bin is kept for a resume: %v", stages)
	}
	cmpStores(t, a.store, gen, b.store, lastLine(harness.Run(t, "pull", "--plain-http", ref+":v1", b.store)), 64<<20)
}

// testHtpasswd is the bcrypt (cost 4) entry of user fleet with password
// fleet-secret, for a registry with htpasswd authentication.
const testHtpasswd = "fleet:$2a$04$xPNSvIX8smVFv57ky9WuW.HnWel5lZcyqaT5Vkvac2H4VrxWY5YOG\n"

// TestRegistryCredentials runs push and pull against a registry that
// requires a login: without credentials push fails and says so; with the
// login in a Docker config.json (as docker login writes it), push works,
// and so does a pull into a mounted store, whose daemon uses the config
// the command names (--docker-config), not its own.
func TestRegistryCredentials(t *testing.T) {
	harness.RequireFUSE(t)
	dir := t.TempDir()
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(testHtpasswd), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := startRegistryWith(t, fmt.Sprintf("auth:\n  htpasswd:\n    realm: templatefs-test\n    path: %s\n", htpasswd))
	a := newSession(t, "--memory", "16MiB")
	gen := a.publish(t)
	ref := reg.addr + "/templates/private:v1"
	if r := harness.RunStatus(t, "push", "--plain-http", a.store, gen, ref); r.Code != 1 || !strings.Contains(r.Stderr, "credential") {
		t.Errorf("push without credentials: %v; want exit 1 naming the missing credential", r)
	}
	login := filepath.Join(dir, "docker")
	if err := os.Mkdir(login, 0o700); err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("fleet:fleet-secret"))
	if err := os.WriteFile(filepath.Join(login, "config.json"), []byte(`{"auths":{"`+reg.addr+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.Run(t, "push", "--plain-http", "--docker-config", login, a.store, gen, ref)
	b := newSession(t)
	harness.StartMount(t, b.store, b.mnt)
	if r := harness.RunStatus(t, "pull", "--plain-http", ref, b.store); r.Code != 1 || !strings.Contains(r.Stderr, "credential") {
		t.Errorf("pull without credentials through the daemon: %v; want exit 1 naming the missing credential", r)
	}
	bgen := lastLine(harness.Run(t, "pull", "--plain-http", "--docker-config", login, ref, b.store))
	cmpStores(t, a.store, gen, b.store, bgen, 16<<20)
}

// TestRegistryWithoutPlainHTTP: push and pull without --plain-http to a
// registry that talks plain HTTP fail saying to give --plain-http, and
// change neither store.
func TestRegistryWithoutPlainHTTP(t *testing.T) {
	reg := startRegistry(t)
	a := newSession(t)
	gen := a.publish(t)
	ref := reg.addr + "/templates/plain:v1"
	const hint = "the registry talks plain HTTP: give --plain-http"
	if r := harness.RunStatus(t, "push", a.store, gen, ref); r.Code != 1 || r.Stdout != "" || !strings.Contains(r.Stderr, hint) {
		t.Errorf("push without --plain-http: %v\nstdout: %s\nwant exit 1 and %q", r, r.Stdout, hint)
	}
	harness.Run(t, "push", "--plain-http", a.store, gen, ref)
	b := newSession(t)
	if r := harness.RunStatus(t, "pull", ref, b.store); r.Code != 1 || r.Stdout != "" || !strings.Contains(r.Stderr, hint) {
		t.Errorf("pull without --plain-http: %v\nstdout: %s\nwant exit 1 and %q", r, r.Stdout, hint)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.store, "payload")); len(entries) != 0 {
		t.Errorf("a refused pull published %v", entries)
	}
	harness.Run(t, "fsck", b.store)
}
