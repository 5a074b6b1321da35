//go:build linux

package crash

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"templatefs/store"
	"templatefs/tests/harness"
)

// Strings the tools print for the errnos (strerror).
const (
	noSpace  = "No space left on device"
	ioError  = "Input/output error"
	readOnly = "Read-only file system"
)

// echo returns the tool command `echo text > path` run by bash, whose
// echo prints the errno of a failed write (dash's printf says only "I/O
// error").
func echo(text, path string) []string {
	return []string{"bash", "-c", `echo "$1" > "$2"`, "bash", text, path}
}

// TestFaultsThroughMount arms error points (store.FailpointEnv
// <name>:<errno>) in real daemons and drives them with file tools: the
// operation fails with the errno, the mount shows what it showed before,
// and, the failed step being an index commit, the daemon refuses every
// later change with EROFS, says why in MNT/store and in its log, and
// keeps serving reads. A restart without the fault reads the store from
// disk again, takes the change, and fsck finds nothing.
func TestFaultsThroughMount(t *testing.T) {
	harness.RequireFUSE(t)
	tmpl := template(t, t.TempDir())
	cases := []struct {
		spec   string   // the armed error point and errno
		op     []string // the change, run against the armed daemon and again after the restart
		strerr string   // what the tool prints for the errno
		setup  func(t *testing.T, f *fixture)
	}{
		// A lease create is acknowledged at close (touch reports a
		// failed close: "failed to close"), or, with O_TRUNC or O_APPEND
		// (shell redirections, which ignore close's result), at the
		// open; either way the tool fails.
		{spec: "lease-commit:ENOSPC", op: []string{"touch", "MNT/generations/" + g1 + "/leases/x"}, strerr: noSpace},
		{spec: "lease-commit:EIO", op: []string{"touch", "MNT/keys/{key}/leases/x"}, strerr: ioError},
		{spec: "lease-commit:EIO", op: []string{"sh", "-c", `: > "$1"`, "sh", "MNT/generations/" + g1 + "/leases/x"}, strerr: ioError},
		{spec: "lease-commit:ENOSPC", op: []string{"bash", "-c", `: >> "$1"`, "bash", "MNT/keys/{key}/leases/x"}, strerr: noSpace},
		{
			// Open (O_TRUNC: the open waits for the commit), write, close.
			spec: "lease-commit:EIO", op: echo("pid {pid}", "MNT/generations/"+g1+"/leases/x"), strerr: ioError,
			setup: func(t *testing.T, f *fixture) { f.proc = harness.Sleeper(t) },
		},
		{
			// Open with O_EXCL and no O_TRUNC (noclobber), write, close:
			// the write waits for the commit and fails with its errno.
			spec: "lease-commit:EIO", op: []string{"bash", "-c", `set -C; echo "pid $2" > "$1"`, "bash", "MNT/generations/" + g1 + "/leases/x", "{pid}"}, strerr: ioError,
			setup: func(t *testing.T, f *fixture) { f.proc = harness.Sleeper(t) },
		},
		{spec: "tombstone-commit:EIO", op: echo("tombstone", "MNT/generations/"+g1+"/ctl"), strerr: ioError},
		{spec: "tombstone-commit:ENOSPC", op: []string{"mv", "MNT/generations/" + g1, "MNT/tombstones/"}, strerr: noSpace},
		{
			spec: "release-begin-commit:ENOSPC", op: []string{"rm", "MNT/leases/held"}, strerr: noSpace,
			setup: func(t *testing.T, f *fixture) {
				f.bindExited(t, "held")
				f.released["held"] = true // by the rm after the restart
			},
		},
		{
			spec: "cancel-commit:ENOSPC", op: echo("cancel", "MNT/leases/held"), strerr: noSpace,
			setup: func(t *testing.T, f *fixture) { f.released["held"] = true }, // by the cancel after the restart
		},
		{
			// A process carrying held's launch ID opens a payload: the
			// bind fails, so does the open.
			spec: "autobind-commit:EIO", op: launchedCat(), strerr: ioError,
			setup: func(t *testing.T, f *fixture) { f.readLaunch(t) },
		},
		{
			spec: "bind-commit:EIO", op: echo("pid {pid}", "MNT/leases/held"), strerr: ioError,
			setup: func(t *testing.T, f *fixture) { f.proc = harness.Sleeper(t) },
		},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			f := tmpl.copyTemplate(t)
			if c.setup != nil {
				c.setup(t, f)
			}
			d := f.mountArmed(t, c.spec)
			before := f.look(t)
			op := f.expand(c.op)
			r := harness.Tool(t, op[0], op[1:]...)
			if r.Code == 0 || !strings.Contains(r.Stderr, c.strerr) {
				t.Errorf("%q against the daemon with %s armed: %v; want a failure with %q", op, c.spec, r, c.strerr)
			}
			if after := f.look(t); !maps.Equal(after.gens, before.gens) || !maps.EqualFunc(after.leases, before.leases, sameLease) {
				t.Errorf("the failed %q changed the mount: before %+v, after %+v", op, before, after)
			}

			// Read-only from now on: changes refused, reads served.
			status := harness.MustTool(t, "cat", f.path("store"))
			if !strings.Contains(status, "\nread_only: store is read-only") || !strings.Contains(strings.ToLower(status), strings.ToLower(c.strerr)) {
				t.Errorf("MNT/store after the failed commit:\n%s\nwant a read_only line naming %q", status, c.strerr)
			}
			for _, change := range [][]string{
				{"touch", f.path("generations", g1, "leases", "later")},
				{"mv", f.path("generations", g1), f.path("tombstones") + "/"},
			} {
				if r := harness.Tool(t, change[0], change[1:]...); r.Code == 0 || !strings.Contains(r.Stderr, readOnly) {
					t.Errorf("%q on the read-only store: %v; want %q", change, r, readOnly)
				}
			}
			harness.MustTool(t, "cat", f.path("leases", "held"))
			harness.MustTool(t, "cmp", f.path("generations", g1, "payload", "state.bin"), f.sample+"/state.bin")
			d.Stop()
			if log := d.Log(); !strings.Contains(log, "read-only") || !strings.Contains(strings.ToLower(log), strings.ToLower(c.strerr)) {
				t.Errorf("daemon log does not say the store went read-only and why:\n%s", log)
			}

			// A restart reads the store again and takes the change.
			d = f.mount(t)
			if status := harness.MustTool(t, "cat", f.path("store")); !strings.Contains(status, "\nread_only: no\n") {
				t.Errorf("MNT/store after the restart:\n%s\nwant read_only: no", status)
			}
			harness.MustTool(t, op[0], op[1:]...)
			f.checkInvariants(t, f.look(t))
			d.Stop()
			if got := f.fsckKinds(t, "--digests"); len(got) != 0 {
				t.Errorf("fsck after the restart found %q", got)
			}
		})
	}
}

// sameLease compares what look reads of two lease files.
func sameLease(a, b leaseFile) bool {
	return a.CloneID == b.CloneID && a.Generation == b.Generation && a.State == b.State && (a.Process == nil) == (b.Process == nil)
}

// TestFaultsInCLI arms error points in `templatefs publish` and
// `templatefs settings`: the command exits 1 naming the errno, nothing is
// published or changed, and fsck finds nothing; the same command without
// the fault succeeds.
func TestFaultsInCLI(t *testing.T) {
	harness.RequireFUSE(t) // for the template
	tmpl := template(t, t.TempDir())
	cases := []struct {
		spec, strerr string
		args         func(f *fixture) []string
		// before is the problem kinds fsck finds right after the
		// failure: leftovers the next normal open removes.
		before []string
		check  func(t *testing.T, f *fixture)
	}{
		{spec: "payload-write:ENOSPC", strerr: "no space left on device"},
		{spec: "payload-fsync:EIO", strerr: "input/output error"},
		{spec: "publish-commit:ENOSPC", strerr: "no space left on device", before: []string{store.ProblemPayloadOrphaned}},
		{
			spec: "settings-commit:EIO", strerr: "input/output error",
			args: func(f *fixture) []string { return []string{"settings", "--restore-window", "48h", f.store} },
			check: func(t *testing.T, f *fixture) {
				if out := harness.Run(t, "settings", f.store); strings.HasPrefix(out, "restore_window: 48h0m0s\n") {
					t.Errorf("settings after the failed change:\n%s", out)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			f := tmpl.copyTemplate(t)
			args := []string{"publish", "--duplicate", f.store, f.sample, "--class", f.class}
			if c.args != nil {
				args = c.args(f)
			}
			payload, _ := f.storeEntries(t)
			cmd := harness.Command(t, args...)
			cmd.Env = append(cmd.Env, "TEMPLATEFS_FAILPOINT="+c.spec)
			if r := harness.Exec(t, cmd); r.Code != 1 || !strings.Contains(r.Stderr, c.strerr) {
				t.Errorf("templatefs %q with %s armed: %v; want exit 1 naming %q", args, c.spec, r, c.strerr)
			}
			if got := f.fsckKinds(t); !slices.Equal(got, c.before) {
				t.Errorf("fsck right after the failure found %q, want %q", got, c.before)
			}
			if c.check != nil {
				c.check(t, f)
			}
			if p, s := f.storeEntries(t); len(s) != 0 || c.before == nil && !slices.Equal(p, payload) {
				t.Errorf("after the failure payload/ holds %q (before %q), staging/ %q", p, payload, s)
			}
			// Without the fault the command succeeds; its open removes
			// the leftovers.
			harness.Run(t, args...)
			if got := f.fsckKinds(t, "--digests"); len(got) != 0 {
				t.Errorf("fsck after the command succeeded found %q", got)
			}
		})
	}
}
