//go:build linux

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/tests/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// definedFlags returns cmd's FlagSet with its flags defined, by running
// cmd with --help in-process, which returns before it does anything.
func definedFlags(t *testing.T, cmd command) *flag.FlagSet {
	t.Helper()
	fl := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var err error
	if cmd.prepare != nil {
		_, err = cmd.prepare(fl, []string{"--help"})
	} else {
		err = cmd.run(fl, []string{"--help"}, io.Discard)
	}
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("%s --help in-process: %v, want flag.ErrHelp", cmd.name, err)
	}
	return fl
}

// oneLine is s with every run of white space made one space, so that
// checks do not depend on where help wraps its lines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestCommandHelp runs the real binary for every command in the command
// table: -h, --help and `help CMD` print the usage line, every flag with
// its meaning and default, and an example on stdout, with exit status 0.
func TestCommandHelp(t *testing.T) {
	for _, cmd := range commands {
		t.Run(cmd.name, func(t *testing.T) {
			fl := definedFlags(t, cmd)
			var want []string
			want = append(want, "usage: "+synopsis(cmd, fl), oneLine(cmd.about), "Example: "+cmd.example, "-h, --help")
			fl.VisitAll(func(f *flag.Flag) {
				if f.DefValue == "" && defaultText(cmd, f) == "(default )" {
					t.Errorf("flag --%s has no default to show, is not required and does not say what leaving it out means", f.Name)
				}
				_, usage := flag.UnquoteUsage(f)
				want = append(want, oneLine(flagSynopsis(f)+" "+usage+" "+defaultText(cmd, f)))
			})
			if !strings.HasPrefix(cmd.example, "templatefs "+cmd.name) {
				t.Errorf("example %q does not run templatefs %s", cmd.example, cmd.name)
			}
			var helpOut string
			for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}, {"help", cmd.name}} {
				r := harness.RunStatus(t, args...)
				if r.Code != 0 || r.Stderr != "" {
					t.Errorf("templatefs %q: %v; want exit 0 and nothing on stderr", args, r)
				}
				got := oneLine(r.Stdout)
				for _, w := range want {
					if !strings.Contains(got, w) {
						t.Errorf("templatefs %q: stdout lacks %q:\n%s", args, w, r.Stdout)
					}
				}
				if helpOut != "" && r.Stdout != helpOut {
					t.Errorf("templatefs %q printed other help than %s --help:\n%s", args, cmd.name, r.Stdout)
				}
				helpOut = r.Stdout
			}
		})
	}
}

// TestCommandUsageErrors runs the real binary for every command in the
// command table with an unknown flag, one argument too few and one too
// many: each exits 2 with the message and the usage on stderr, prints
// nothing on stdout and creates nothing.
func TestCommandUsageErrors(t *testing.T) {
	for _, cmd := range commands {
		t.Run(cmd.name, func(t *testing.T) {
			dir := t.TempDir()
			var args []string // arguments that would do something
			for _, a := range cmd.args {
				args = append(args, filepath.Join(dir, strings.ToLower(a)))
			}
			extra := filepath.Join(dir, "extra")
			extraMessage := argCountMessage(cmd, len(args)+1)
			if cmd.more != "" { // any number may follow, but this is no GEN
				extraMessage = fmt.Sprintf("%s %q is not a generation ID (such as g000001)", cmd.more, extra)
				if cmd.name == "fleet" { // it also takes fleet IDs
					extraMessage += " nor a fleet ID (64 lowercase hex digits)"
				}
			}
			cases := []struct {
				name, message string
				args          []string
			}{
				{"unknown flag", "flag provided but not defined: -no-such-flag", append([]string{"--no-such-flag"}, args...)},
				{"extra argument", extraMessage, append(args[:len(args):len(args)], extra)},
			}
			if len(args) > 0 {
				cases = append(cases, struct {
					name, message string
					args          []string
				}{"missing argument", argCountMessage(cmd, len(args)-1), args[:len(args)-1]})
			}
			for _, c := range cases {
				r := harness.RunStatus(t, append([]string{cmd.name}, c.args...)...)
				wantErr := "templatefs " + cmd.name + ": " + c.message + "\n\nusage: templatefs " + cmd.name
				if r.Code != 2 || !strings.HasPrefix(r.Stderr, wantErr) || r.Stdout != "" {
					t.Errorf("%s: templatefs %s %q: %v\nstdout: %q\nwant exit 2, stderr starting %q", c.name, cmd.name, c.args, r, r.Stdout, wantErr)
				}
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
				t.Errorf("usage errors left %v in %s (%v)", ents, dir, err)
			}
		})
	}
}

// TestCommandList: --help, -h and help list every command in the command
// table with its summary on stdout, exit 0; no command, an unknown one, or
// help with a bad argument prints the list on stderr, exit 2.
func TestCommandList(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		prefix string // of the stream that holds the list
	}{
		{[]string{"--help"}, 0, "usage: templatefs COMMAND"},
		{[]string{"-h"}, 0, "usage: templatefs COMMAND"},
		{[]string{"help"}, 0, "usage: templatefs COMMAND"},
		{[]string{"help", "-h"}, 0, "usage: templatefs COMMAND"},
		{[]string{"help", "help"}, 0, "usage: templatefs COMMAND"},
		{nil, 2, "usage: templatefs COMMAND"},
		{[]string{"frobnicate"}, 2, "templatefs: unknown command \"frobnicate\"\nusage: templatefs COMMAND"},
		{[]string{"help", "frobnicate"}, 2, "templatefs: unknown command \"frobnicate\"\nusage: templatefs COMMAND"},
		{[]string{"help", "init", "publish"}, 2, "templatefs help: takes at most 1 argument (COMMAND), got 2\nusage: templatefs COMMAND"},
	} {
		r := harness.RunStatus(t, c.args...)
		list, other := r.Stdout, r.Stderr
		if c.code != 0 {
			list, other = r.Stderr, r.Stdout
		}
		if r.Code != c.code || other != "" || !strings.HasPrefix(list, c.prefix) {
			t.Errorf("templatefs %q: %v\nstdout: %s\nwant exit %d and only the list (on stderr if not 0), starting %q", c.args, r, r.Stdout, c.code, c.prefix)
		}
		for _, cmd := range commands {
			if !strings.Contains(oneLine(list), " "+cmd.name+" "+cmd.summary+" ") {
				t.Errorf("templatefs %q: the command list lacks %q:\n%s", c.args, cmd.name+"  "+cmd.summary, list)
			}
		}
	}
}

// TestArgumentsAfterFlags: flags may follow the positional arguments, and
// after "--" an argument starting with "-" is positional.
func TestArgumentsAfterFlags(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) harness.Result {
		cmd := harness.Command(t, args...)
		cmd.Dir = dir
		return harness.Exec(t, cmd)
	}
	if r := run("init", "-store"); r.Code != 2 || !strings.Contains(r.Stderr, "flag provided but not defined: -store") {
		t.Errorf("init -store: %v; want exit 2, -store not a flag", r)
	}
	if r := run("init", "--", "-store"); r.Code != 0 {
		t.Errorf("init -- -store: %v; want exit 0", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "-store", "index.db")); err != nil {
		t.Errorf("init -- -store made no store: %v", err)
	}
	if r := run("settings", "--", "-store", "--restore-window", "2d"); r.Code != 2 || !strings.Contains(r.Stderr, "takes 1 argument (STORE), got 3") {
		t.Errorf("settings -- -store --restore-window 2d: %v; want exit 2 for 3 arguments", r)
	}
	if r := run("settings", "./-store", "--restore-window", "2d", "--refuse-reboot"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "restore_window: 48h0m0s\nrefuse_reboot: true\n") {
		t.Errorf("settings STORE --restore-window 2d --refuse-reboot: %v\nstdout: %s", r, r.Stdout)
	}
}

// TestREADMECommands: the README's Commands section shows each command's
// usage line as its help prints it.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range commands {
		if line := synopsis(cmd, definedFlags(t, cmd)); !strings.Contains(string(readme), "\n"+line+"\n") {
			t.Errorf("README.md lacks the usage line %q on a line of its own", line)
		}
	}
}

// TestBadReference: push and pull refuse a malformed REF as a usage error
// (exit 2, the reason and the usage on stderr) before they open the
// store, which stays as it was.
func TestBadReference(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "store")
	if r := harness.RunStatus(t, "init", st); r.Code != 0 {
		t.Fatalf("init: %v", r)
	}
	before, err := os.ReadFile(filepath.Join(st, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args    []string
		message string
	}{
		{[]string{"push", st, "g000001", "not a ref"}, `REF: reference "not a ref": invalid reference`},
		{[]string{"push", st, "g000001", "127.0.0.1:1/Upper:v1"}, `REF: reference "127.0.0.1:1/Upper:v1": invalid reference`},
		{[]string{"push", st, "g000001", "127.0.0.1:1/templates/web"}, `REF: reference "127.0.0.1:1/templates/web" names no tag`},
		{[]string{"pull", "not a ref", st}, `REF: reference "not a ref": invalid reference`},
		{[]string{"pull", "127.0.0.1:1/templates/web", st}, `REF: reference "127.0.0.1:1/templates/web" names no tag`},
		{[]string{"pull", "127.0.0.1:1/templates/web@sha256:abc", st}, `REF: reference "127.0.0.1:1/templates/web@sha256:abc": invalid reference`},
	} {
		r := harness.RunStatus(t, c.args...)
		want := "templatefs " + c.args[0] + ": " + c.message
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, want) || !strings.Contains(r.Stderr, "\n\nusage: templatefs "+c.args[0]) || r.Stdout != "" {
			t.Errorf("templatefs %q: %v\nstdout: %q\nwant exit 2, stderr starting %q and the usage", c.args, r, r.Stdout, want)
		}
	}
	after, err := os.ReadFile(filepath.Join(st, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("a refused REF changed %s", filepath.Join(st, "index.db"))
	}
}

// TestMountFleetFlags: mount refuses fleet flags that cannot work as
// usage errors (exit 2) before it opens the store or mounts anything.
func TestMountFleetFlags(t *testing.T) {
	dir := t.TempDir()
	st, mnt := filepath.Join(dir, "store"), filepath.Join(dir, "mnt")
	if r := harness.RunStatus(t, "init", st); r.Code != 0 {
		t.Fatalf("init: %v", r)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags   []string
		message string
	}{
		{[]string{"--fleet-prefix", "/f/"}, `--fleet-prefix "/f/": only with --fleet-etcd`},
		{[]string{"--fleet-etcd", "http://127.0.0.1:1", "--fleet-prefix", "f"}, `--fleet-prefix "f": want a key prefix that starts and ends with /`},
		{[]string{"--fleet-etcd", "notaurl"}, `--fleet-etcd: "notaurl" is not an etcd client URL`},
		{[]string{"--fleet-etcd", "http://127.0.0.1:1,"}, `--fleet-etcd: "" is not an etcd client URL`},
		{[]string{"--fleet-etcd", "ftp://127.0.0.1:1"}, `--fleet-etcd: "ftp://127.0.0.1:1" is not an etcd client URL`},
		{[]string{"--fleet-etcd", "http://127.0.0.1:1/v3?x=1"}, `--fleet-etcd: "http://127.0.0.1:1/v3?x=1" is not an etcd client URL`},
	} {
		args := append(append([]string{"mount"}, c.flags...), st, mnt)
		r := harness.RunStatus(t, args...)
		want := "templatefs mount: " + c.message
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, want) || r.Stdout != "" {
			t.Errorf("templatefs %q: %v\nstdout: %q\nwant exit 2, stderr starting %q", args, r, r.Stdout, want)
		}
		if harness.IsMounted(t, mnt) {
			t.Fatalf("templatefs %q left %s mounted", args, mnt)
		}
	}
	for _, e := range []string{"http://127.0.0.1:2379", "https://etcd1:2379/", "etcd1:2379", "[::1]:2379"} {
		if !isEndpoint(e) {
			t.Errorf("isEndpoint(%q) = false, want true", e)
		}
	}
}
