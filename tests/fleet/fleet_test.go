//go:build linux

// Package fleet_test runs two and three real daemons (the templatefs
// binary), each with its own store and mount, as the hosts of one fleet
// on a real etcd server (Debian's etcd-server), and drives them with
// file operations and the CLI.
package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"templatefs/internal/etcdtest"
	"templatefs/store"
	"templatefs/tests/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// hangGuard bounds every wait for the fleet: a guard against a hang,
// not a measure of speed (bench/fleet measures the propagation).
const hangGuard = 30 * time.Second

const prefix = "/test-fleet/"

// capture is a sample capture and its class, published into every host.
type capture struct{ dir, class string }

// newCaptures writes n distinct sample captures under top.
func newCaptures(t *testing.T, top string, n int) []capture {
	t.Helper()
	var caps []capture
	for i := range n {
		out := filepath.Join(top, fmt.Sprintf("cap%d", i))
		harness.Run(t, "sample-capture", "--memory", "1MiB", out)
		caps = append(caps, capture{filepath.Join(out, "capture"), filepath.Join(out, "class.json")})
	}
	return caps
}

// host is one daemon with its own store and mount.
type host struct {
	name, store, mnt string
	gens             []string // the generation of each capture, in order
	d                *harness.Daemon
}

// newHost makes a store holding caps (the same bytes on every host, so
// the same fleet identities) and a mountpoint; mount starts its daemon.
func newHost(t *testing.T, top, name string, caps []capture) *host {
	t.Helper()
	h := &host{name: name, store: filepath.Join(top, name, "store"), mnt: filepath.Join(top, name, "mnt")}
	if err := os.MkdirAll(h.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	harness.Run(t, "init", h.store)
	for _, c := range caps {
		out := harness.Lines(harness.Run(t, "publish", h.store, c.dir, "--class", c.class))
		h.gens = append(h.gens, out[len(out)-1])
	}
	return h
}

func (h *host) mount(t *testing.T, etcd *etcdtest.Server) {
	t.Helper()
	h.d = harness.StartMount(t, h.store, h.mnt, "--fleet-etcd", etcd.ClientURL, "--fleet-prefix", prefix)
}

func (h *host) path(parts ...string) string {
	return filepath.Join(append([]string{h.mnt}, parts...)...)
}

// field returns the value of "key: value" line key of the file at path,
// "" if the file or the line is missing.
func field(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+": "); ok {
			return v
		}
	}
	return ""
}

// fleetState is the host's "fleet:" line of MNT/store.
func (h *host) fleetState() string { return field(h.path("store"), "fleet") }

// metric is the value of the unlabelled metric name in the host's
// MNT/metrics, "" if it has none.
func metric(t *testing.T, h *host, name string) string {
	t.Helper()
	b, err := os.ReadFile(h.path("metrics"))
	if err != nil {
		t.Fatalf("%s: read metrics: %v", h.name, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

// state is the state line of generation i's status wherever it is listed.
func (h *host) state(i int) string {
	for _, dir := range []string{"generations", "tombstones", "retiring"} {
		if s := field(h.path(dir, h.gens[i], "status"), "state"); s != "" {
			return s
		}
	}
	return ""
}

func (h *host) fleetID(t *testing.T, i int) string {
	t.Helper()
	for _, dir := range []string{"generations", "tombstones"} {
		if id := field(h.path(dir, h.gens[i], "status"), "fleet_id"); id != "" {
			return id
		}
	}
	t.Fatalf("%s: no fleet_id in the status of %s", h.name, h.gens[i])
	return ""
}

// waitFor polls cond until it holds, failing the test after hangGuard.
func waitFor(t *testing.T, what string, cond func() bool, hosts ...*host) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > hangGuard {
			for _, h := range hosts {
				b, _ := os.ReadFile(h.path("store"))
				t.Logf("%s MNT/store:\n%s\nlog:\n%s", h.name, b, h.d.Log())
			}
			t.Fatalf("%s: not within %v", what, hangGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func connected(t *testing.T, hosts ...*host) {
	t.Helper()
	for _, h := range hosts {
		waitFor(t, h.name+" connected", func() bool { return h.fleetState() == "connected" }, h)
		if m := metric(t, h, "templatefs_fleet_connected"); m != "1" {
			t.Errorf("%s: templatefs_fleet_connected = %q once connected, want 1", h.name, m)
		}
	}
}

// etcdGet returns the value of key in etcd, "" if missing.
func etcdGet(t *testing.T, c *clientv3.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func etcdClient(t *testing.T, etcd *etcdtest.Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.ClientURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFleetTombstoneAndLift: a tombstone set on host A by mv through its
// mount quarantines the same template on hosts B and C while B holds a
// lease on it (B refuses a new lease with EPERM; B's bound lease keeps its
// process and its payload reads), and is in etcd with A's host ID; a
// lift on B by the ctl write releases it on A and C; the fleet CLI on A
// tombstones and lifts a template by fleet ID on B. Every host is in the
// catalog.
func TestFleetTombstoneAndLift(t *testing.T) {
	harness.RequireFUSE(t)
	etcd := etcdtest.Start(t)
	top := t.TempDir()
	caps := newCaptures(t, top, 2)
	a, b, h3 := newHost(t, top, "a", caps), newHost(t, top, "b", caps), newHost(t, top, "c", caps)
	a.mount(t, etcd)
	b.mount(t, etcd)
	h3.mount(t, etcd)
	connected(t, a, b, h3)
	c := etcdClient(t, etcd)
	id := b.fleetID(t, 0)
	if got := a.fleetID(t, 0); got != id {
		t.Fatalf("fleet ID of the same capture: %s on a, %s on b", got, id)
	}

	// B holds a lease bound to a live process.
	if err := os.WriteFile(b.path("generations", b.gens[0], "leases", "clone-b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	clone := harness.Sleeper(t)
	if err := os.WriteFile(b.path("leases", "clone-b"), []byte(fmt.Sprintf("pid %d\n", clone.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	harness.MustTool(t, "mv", a.path("generations", a.gens[0]), a.path("tombstones")+"/")
	took := waitFor(t, "tombstone from a seen on b", func() bool { return b.state(0) == "tombstoned" }, a, b)
	t.Logf("tombstone on a seen on b after %v", took)
	waitFor(t, "tombstone from a seen on c", func() bool { return h3.state(0) == "tombstoned" }, a, h3)

	_, err := os.OpenFile(b.path("tombstones", b.gens[0], "leases", "clone-new"), os.O_CREATE|os.O_WRONLY, 0o644)
	if !errors.Is(err, syscall.EPERM) {
		t.Errorf("new lease on b after the fleet tombstone: %v, want EPERM", err)
	}
	if rec, err := os.ReadFile(b.path("leases", "clone-b")); err != nil || !strings.Contains(string(rec), `"state":"bound"`) {
		t.Errorf("b's lease after the fleet tombstone: %s, %v; want it still bound", rec, err)
	}
	got, err := os.ReadFile(b.path("tombstones", b.gens[0], "payload", "state.bin"))
	want, _ := os.ReadFile(filepath.Join(caps[0].dir, "state.bin"))
	if err != nil || string(got) != string(want) {
		t.Errorf("b's payload read under the fleet tombstone: %d bytes, %v; want the capture's %d", len(got), err, len(want))
	}
	rec := etcdGet(t, c, prefix+"tombstones/"+id)
	storeA := field(a.path("store"), "store_id")
	if !strings.Contains(rec, `"state":"tombstoned"`) || !strings.Contains(rec, storeA) {
		t.Errorf("etcd tombstone record %q: want state tombstoned and a's host ID %s", rec, storeA)
	}
	for _, h := range []*host{a, b, h3} {
		if v := etcdGet(t, c, prefix+"catalog/"+id+"/"+field(h.path("store"), "store_id")); !strings.Contains(v, h.gens[0]) {
			t.Errorf("catalog entry of %s for %s: %q", h.name, id, v)
		}
	}

	// Lift on B by the ctl write: A's generation is published again.
	if err := os.WriteFile(b.path("tombstones", b.gens[0], "ctl"), []byte("lift\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, "lift from b seen on a", func() bool { return a.state(0) == "published" }, a, b)
	t.Logf("lift on b seen on a after %v", took)
	waitFor(t, "lift from b seen on c", func() bool { return h3.state(0) == "published" }, b, h3)

	// The fleet CLI on A, by fleet ID, through A's daemon.
	id1 := a.fleetID(t, 1)
	out := harness.Run(t, "fleet", "tombstone", "--reason", "bad kernel", a.store, id1)
	if !strings.Contains(out, "queued for the fleet") {
		t.Errorf("fleet tombstone printed %q", out)
	}
	waitFor(t, "CLI tombstone from a seen on b", func() bool { return b.state(1) == "tombstoned" }, a, b)
	if rec := etcdGet(t, c, prefix+"tombstones/"+id1); !strings.Contains(rec, `"reason":"bad kernel"`) {
		t.Errorf("etcd record of the CLI tombstone %q: want its reason", rec)
	}
	status := harness.Run(t, "fleet", "status", b.store)
	if !strings.Contains(status, "fleet: connected") || !strings.Contains(status, b.gens[1]+" "+id1+" tombstoned") {
		t.Errorf("fleet status on b:\n%s", status)
	}
	harness.Run(t, "fleet", "lift", a.store, a.gens[1])
	waitFor(t, "CLI lift from a seen on b", func() bool { return b.state(1) == "published" }, a, b)
	if q := field(a.path("store"), "fleet_queued"); q != "0" {
		t.Errorf("a's fleet_queued = %q, want 0", q)
	}
	a.d.Stop()
	b.d.Stop()
	h3.d.Stop()
}

// TestFleetOutage: etcd stops; both hosts keep serving and leasing with
// what they know and show disconnected; host A's tombstone is queued
// (fleet_queued: 1). Before the outage, host B was stopped, and A
// tombstoned another template and etcd compacted its history, so B's
// revision is gone: B, started while etcd is down, serves, says
// disconnected, grants a lease it would otherwise grant and queues a
// tombstone of its own. When etcd is back both reconnect: B
// resynchronises, every tombstone set meanwhile (A's before the
// compaction, A's and B's during the outage) is applied on both hosts,
// queues are empty, and B's lease is still there.
func TestFleetOutage(t *testing.T) {
	harness.RequireFUSE(t)
	etcd := etcdtest.Start(t)
	top := t.TempDir()
	caps := newCaptures(t, top, 3)
	a, b := newHost(t, top, "a", caps), newHost(t, top, "b", caps)
	a.mount(t, etcd)
	b.mount(t, etcd)
	connected(t, a, b)
	b.d.Stop()
	c := etcdClient(t, etcd)

	// While B is away: A tombstones capture 1, and etcd compacts.
	harness.MustTool(t, "mv", a.path("generations", a.gens[1]), a.path("tombstones")+"/")
	waitFor(t, "a's tombstone in etcd", func() bool {
		return field(a.path("store"), "fleet_queued") == "0" && etcdGet(t, c, prefix+"tombstones/"+a.fleetID(t, 1)) != ""
	}, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "compact-marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}

	etcd.Stop()
	waitFor(t, "a disconnected", func() bool { return a.fleetState() == "disconnected" }, a)
	if m := metric(t, a, "templatefs_fleet_connected"); m != "0" {
		t.Errorf("a's templatefs_fleet_connected while disconnected = %q, want 0", m)
	}
	harness.MustTool(t, "mv", a.path("generations", a.gens[0]), a.path("tombstones")+"/")
	if q := field(a.path("store"), "fleet_queued"); q != "1" {
		t.Errorf("a's fleet_queued during the outage = %q, want 1", q)
	}
	if m := metric(t, a, "templatefs_fleet_queued"); m != "1" {
		t.Errorf("a's templatefs_fleet_queued during the outage = %q, want 1", m)
	}

	b.mount(t, etcd)
	waitFor(t, "b says disconnected", func() bool { return b.fleetState() == "disconnected" }, b)
	b.d.WaitLog("etcd unreachable", hangGuard)
	// B grants what it would grant: it has not heard of A's tombstones.
	if err := os.WriteFile(b.path("generations", b.gens[0], "leases", "clone-b"), nil, 0o644); err != nil {
		t.Errorf("lease on b while etcd is down: %v", err)
	}
	if err := os.WriteFile(b.path("generations", b.gens[2], "ctl"), []byte("tombstone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if q := field(b.path("store"), "fleet_queued"); q != "1" {
		t.Errorf("b's fleet_queued while etcd is down = %q, want 1", q)
	}

	etcd.Restart()
	connected(t, a, b)
	for _, h := range []*host{a, b} {
		for i := range caps {
			waitFor(t, fmt.Sprintf("%s: capture %d tombstoned", h.name, i), func() bool { return h.state(i) == "tombstoned" }, a, b)
		}
		if q := field(h.path("store"), "fleet_queued"); q != "0" {
			t.Errorf("%s's fleet_queued after reconnecting = %q, want 0", h.name, q)
		}
	}
	if !strings.Contains(b.d.Log(), "compacted") || !strings.Contains(b.d.Log(), "resynchronised") {
		t.Errorf("b did not log the compaction and its resynchronisation:\n%s", b.d.Log())
	}
	if _, err := os.Stat(b.path("leases", "clone-b")); err != nil {
		t.Errorf("b's lease after the fleet tombstone: %v", err)
	}
	a.d.Stop()
	b.d.Stop()
}

// TestFleetTombstoneSurvivesKill: host A's daemon is killed (SIGKILL, at
// the fail point right after the tombstone's commit) before it can write
// the tombstone to etcd; the tombstone and its queue row were committed
// together, so the next daemon on A's store writes it, and host B
// quarantines the template.
func TestFleetTombstoneSurvivesKill(t *testing.T) {
	harness.RequireFUSE(t)
	etcd := etcdtest.Start(t)
	top := t.TempDir()
	caps := newCaptures(t, top, 1)
	a, b := newHost(t, top, "a", caps), newHost(t, top, "b", caps)
	cmd := harness.Command(t, "mount", "--fleet-etcd", etcd.ClientURL, "--fleet-prefix", prefix, a.store, a.mnt)
	cmd.Env = append(cmd.Env, store.FailpointEnv+"=tombstone-committed")
	a.d = harness.StartDaemon(t, cmd, a.mnt)
	b.mount(t, etcd)
	connected(t, a, b)

	harness.Tool(t, "mv", a.path("generations", a.gens[0]), a.path("tombstones")+"/") // fails: the daemon dies
	if r := a.d.Wait(harness.KillTimeout); !r.Killed() {
		t.Fatalf("daemon a at the fail point: %v, want killed", r)
	}
	if s := b.state(0); s != "published" {
		t.Fatalf("b's state before a's restart: %s, want published (a died before writing etcd)", s)
	}
	a.mount(t, etcd)
	waitFor(t, "a's queued tombstone applied on b", func() bool { return b.state(0) == "tombstoned" }, a, b)
	if s := a.state(0); s != "tombstoned" {
		t.Errorf("a's state after the restart: %s, want tombstoned", s)
	}
	a.d.Stop()
	b.d.Stop()
}
