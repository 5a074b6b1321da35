// Command templatefs keeps VM template captures in a durable store and serves
// the store as a filesystem. Run `templatefs help` for the commands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// command is one subcommand. run receives the command's own FlagSet (named
// after the command, silent: run's caller prints help and errors), defines
// its flags on it and parses the arguments after the command name with
// parseFlags.
type command struct {
	name     string
	args     []string // the positional arguments, e.g. STORE CAPTURE_DIR
	more     string   // if set, any number of further arguments of this name may follow, e.g. GEN
	required []string // flags that must be given, with a non-empty value
	// unset says, for an optional flag whose default is empty, what
	// leaving it out means, e.g. "no endpoint".
	unset   map[string]string
	summary string // what it does, one line, for the command list
	about   string // what it does and what its arguments are, for --help
	example string // example command lines, for --help
	run     func(fl *flag.FlagSet, args []string, stdout io.Writer) error
	// prepare, set instead of run for a command that works on an open
	// store, parses the command line into the operation (storeOp), which
	// runStore runs offline or hands to the daemon serving the store.
	prepare func(fl *flag.FlagSet, args []string) (storeOp, error)
}

// commands is every subcommand, in the order help lists them. It is set
// in init because the commands' run functions look their command up
// (parseFlags), which a variable's initialiser may not refer to.
var commands []command

func init() {
	commands = []command{
		{
			name:    "init",
			args:    []string{"STORE"},
			summary: "create an empty store",
			about: `Create an empty store in STORE, a directory that is missing or empty,
private to its owner (mode 0700). The settings flags given are stored
with it; the others keep the defaults shown.`,
			example: "templatefs init --restore-window 7d /srv/templates",
			run:     runInit,
		},
		{
			name:    "sample-capture",
			args:    []string{"OUTDIR"},
			summary: "write a valid sample capture and its capture class",
			about: `Write a valid OpenVMM capture of this host, taken now, to OUTDIR/capture/
and its capture class to OUTDIR/class.json, for trying publish and mount.`,
			example: "templatefs sample-capture --memory 1GiB /tmp/cap",
			run:     runSampleCapture,
		},
		{
			name:     "publish",
			args:     []string{"STORE", "CAPTURE_DIR"},
			required: []string{"class"},
			summary:  "publish a capture; the last line printed is the generation ID",
			about: `Publish the capture in CAPTURE_DIR (manifest.bin, state.bin, memory.bin,
maybe scratch.img) into STORE as a new immutable generation under its
compatibility key. Prints the key, then the new generation ID on the last
line. A capture identical to a generation already in the store (same key,
same artifact digests) is not copied again: publish prints that
generation's ID instead, unless --duplicate. A refused capture (also one
whose files change while publish reads them) leaves the store as it was.`,
			example: "templatefs publish /srv/templates /tmp/cap/capture --class /tmp/cap/class.json",
			prepare: preparePublish,
		},
		{
			name:    "push",
			args:    []string{"STORE", "GEN", "REF"},
			summary: "upload a generation to an OCI registry; the last line is REF@digest",
			about: `Upload generation GEN of STORE to the OCI registry repository and tag REF
(registry.example/templates/name:tag) as an OCI artifact: manifest.bin,
state.bin, memory.bin and scratch.img, each in the sparse encoding (holes
are not sent), and a config with the capture class and key that pull
needs to publish it with the same key ID on another host. Blobs the
registry holds already are not sent again. Only a published generation
is pushed. Credentials come from the Docker configuration, as docker and
oras read it (docker login, credential helpers).`,
			example: "templatefs push /srv/templates g000001 registry.example/templates/web:v1",
			prepare: preparePush,
		},
		{
			name:    "pull",
			args:    []string{"REF", "STORE"},
			summary: "download a generation from an OCI registry and publish it; the last line is its ID",
			about: `Download the generation that push uploaded to REF into a staging directory
of STORE (incoming/pull-<digest>/), verify every blob's digest and every
artifact's SHA-256, and publish it with the key ID it had on its source
host, holes restored. Prints the local generation ID on the last line. If
STORE holds the same generation already, nothing is copied and that ID is
printed. An interrupted pull (killed, registry down) keeps the artifacts
it verified: the next pull of REF downloads only the rest. Nothing is
published on any failure.`,
			example: "templatefs pull registry.example/templates/web:v1 /srv/templates",
			prepare: preparePull,
		},
		{
			name:    "mount",
			args:    []string{"STORE", "MNT"},
			summary: "serve STORE at MNT in the foreground until SIGINT or SIGTERM",
			about: `Serve STORE as a filesystem at MNT, an existing directory outside the
store with nothing mounted on it, in the foreground. SIGINT or SIGTERM
detaches the mount (lazily if files are open) and releases the store at
once, so a new daemon can mount it; files already open keep reading, and
the daemon exits when the last is closed (a second signal: as soon as none
is open). A dead mount left by a killed daemon is detached and reused.
With NOTIFY_SOCKET set (systemd Type=notify), the serving daemon runs as
a child that outlives the main process (docs/systemd.md). Go-fuse uses
fusermount3 (Debian package fuse3). With --fleet-etcd the host joins a
fleet (docs/fleet.md): it records the generations it holds in etcd, writes
its tombstones and lifts there and applies every host's within about a
second; while etcd cannot be reached it serves and leases with what the
store knows, queues its own changes durably and shows "fleet:
disconnected" in MNT/store. MNT/metrics (cat it; not listed) shows the
daemon's metrics in the Prometheus text format, and --metrics-listen
serves the same over HTTP (docs/metrics.md).`,
			example: "templatefs mount --metrics-listen 127.0.0.1:9470 /srv/templates /mnt/t &",
			unset:   map[string]string{"metrics-listen": "no HTTP endpoint"},
			run:     runMount,
		},
		{
			name:    "fsck",
			args:    []string{"STORE"},
			summary: "check the store's invariants; exit 1 if a problem remains",
			about: `Check STORE's invariants and print one line per problem. Nothing changes
unless --repair. Exit status 0 when no problem remains (none found, or all
repaired), 1 when any is left. While STORE is mounted the daemon runs the
check; --repair then repairs what it can online and says which problems
need the store unmounted.`,
			example: "templatefs fsck --digests /srv/templates",
			prepare: prepareFsck,
		},
		{
			name:    "verify",
			args:    []string{"STORE"},
			more:    "GEN",
			summary: "re-hash every payload against its recorded SHA-256; exit 1 on a mismatch",
			about: `Read every artifact of every generation in STORE, or of the generations
GEN named (such as g000001), and compare its SHA-256 with the one recorded
at publication: one line per artifact that differs, is missing or has
another hard link. Nothing changes; leases and publications go on
meanwhile, so it can scrub a mounted store. Exit status 0 when every
artifact matches, 1 when any does not or a GEN is not in the store.`,
			example: "templatefs verify /srv/templates g000001",
			prepare: prepareVerify,
		},
		{
			name:    "settings",
			args:    []string{"STORE"},
			summary: "show the eligibility settings, after changing those given",
			about: `Change the eligibility settings given as flags, then print all of them.
Without flags nothing in STORE changes.`,
			example: "templatefs settings --restore-window 72h --refuse-reboot /srv/templates",
			prepare: prepareSettings,
		},
		{
			name:    "fleet",
			args:    []string{"ACTION", "STORE"},
			more:    "ID",
			summary: "tombstone or lift a template on every host of the fleet, or show the fleet state",
			about: `ACTION is tombstone, lift or status. tombstone and lift quarantine (or
release) each template named, by a generation ID of STORE (g000001) or a
fleet ID (64 hex digits, as status and generations/<gen>/status show it),
on every host of the fleet: the change is committed to STORE's fleet queue
before the command returns and applied to STORE's own generations of that
template; the daemon of STORE, mounted with --fleet-etcd, writes it to
etcd (at once, or when etcd answers again) and every host's daemon applies
it within about a second. A fleet ID STORE does not hold is quarantined
on the hosts that do. Leases already granted keep working; retirement
stays each host's own (rmdir). status prints the daemon's link to the
fleet (connected or disconnected, revision, queued changes) and each
generation's fleet ID and state.`,
			example: "templatefs fleet tombstone --reason 'CVE-2026-1234' /srv/templates g000001",
			prepare: prepareFleet,
		},
		{
			name:    "restore",
			args:    []string{"BACKUP_DIR", "STORE"},
			summary: "rebuild a store from a backup of the mount, verifying every digest",
			about: `Rebuild a store in STORE, a directory that is missing or empty, from
BACKUP_DIR, a copy of a mount (tar, rsync, restic or borg): its store.db
and the payloads. Every payload's size and SHA-256 is checked against the
index; on any difference nothing is left behind.`,
			example: "templatefs restore /backup/t /srv/templates",
			run:     runRestore,
		},
		{
			name:    "demo",
			summary: "make a sample store in a temporary directory and mount it",
			about: `Make a store with two sample generations of one key in a new temporary
directory, mount it there and print what to try. Ctrl-C unmounts.`,
			example: "templatefs demo",
			run:     runDemo,
		},
	}
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageError marks a bad command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status: 0 on
// success and for help (printed on stdout), 2 for a usage error (the
// message and the usage on stderr), 1 for any other failure (the message
// on stderr).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printCommands(stderr)
		return 2
	}
	name, args := args[0], args[1:]
	switch {
	case name != "help" && isHelpWord(name):
		printCommands(stdout)
		return 0
	case name == "help":
		if len(args) == 0 || (len(args) == 1 && isHelpWord(args[0])) {
			printCommands(stdout)
			return 0
		}
		if len(args) > 1 {
			fmt.Fprintf(stderr, "templatefs help: takes at most 1 argument (COMMAND), got %d\n", len(args))
			printCommands(stderr)
			return 2
		}
		name, args = args[0], []string{"--help"}
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "templatefs: unknown command %q\n", name)
		printCommands(stderr)
		return 2
	}
	fl := newFlagSet(cmd)
	if cmd.prepare != nil {
		return runStore(cmd, fl, args, stdout, stderr)
	}
	return exitStatus(cmd, fl, cmd.run(fl, args, stdout), stdout, stderr)
}

// newFlagSet makes cmd's FlagSet: named after it, silent (help and errors
// are printed by exitStatus, where they belong).
func newFlagSet(cmd command) *flag.FlagSet {
	fl := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.Usage = func() { printUsage(fl.Output(), cmd, fl) }
	return fl
}

// exitStatus reports err, the outcome of cmd with its FlagSet fl, and
// returns the exit status, as run describes. The daemon reports an
// operation run on a client's behalf with it too, so both print the same.
func exitStatus(cmd command, fl *flag.FlagSet, err error, stdout, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		printHelp(stdout, cmd, fl)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "templatefs %s: %v\n\n", cmd.name, err)
		fl.SetOutput(stderr)
		fl.Usage()
		return 2
	default:
		fmt.Fprintf(stderr, "templatefs %s: %v\n", cmd.name, err)
		return 1
	}
}

// isHelpWord reports whether arg asks for help: "help", "-h", "-help" or
// "--help", so "templatefs help -h" and "templatefs help help" list the
// commands.
func isHelpWord(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// parseFlags parses args with fl, the FlagSet run made for a command, and
// returns the positional arguments. Flags may come before, between and
// after the positional arguments: Go's flag package stops at the first
// non-flag argument, so parseFlags takes that one as a positional and
// parses the rest again. After "--" every argument is positional. It
// returns flag.ErrHelp for -h or --help, and a usageError for an unknown
// flag, a bad flag value, a required flag not given, or a wrong number of
// positional arguments.
func parseFlags(fl *flag.FlagSet, args []string) ([]string, error) {
	cmd, ok := lookup(fl.Name())
	if !ok {
		return nil, fmt.Errorf("parseFlags: no command %q (a FlagSet not made by run)", fl.Name())
	}
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fl.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) < len(cmd.args) || len(pos) > len(cmd.args) && cmd.more == "" {
		return nil, usageError{argCountMessage(cmd, len(pos))}
	}
	for i, p := range pos {
		if p == "" {
			name := cmd.more
			if i < len(cmd.args) {
				name = cmd.args[i]
			}
			return nil, usagef("argument %s is empty", name)
		}
	}
	for _, name := range cmd.required {
		if f := fl.Lookup(name); f == nil || f.Value.String() == "" {
			return nil, usagef("%s is required", flagSynopsis(fl.Lookup(name)))
		}
	}
	return pos, nil
}

// argCountMessage says how many positional arguments cmd takes, and how
// many it got.
func argCountMessage(cmd command, got int) string {
	if cmd.more != "" {
		return fmt.Sprintf("takes %d %s (%s) and any number of %s, got %d", len(cmd.args), plural(len(cmd.args), "argument"), strings.Join(cmd.args, " "), cmd.more, got)
	}
	switch len(cmd.args) {
	case 0:
		return fmt.Sprintf("takes no arguments, got %d", got)
	case 1:
		return fmt.Sprintf("takes 1 argument (%s), got %d", cmd.args[0], got)
	default:
		return fmt.Sprintf("takes %d arguments (%s), got %d", len(cmd.args), strings.Join(cmd.args, " "), got)
	}
}

// parseSize parses a byte count such as 1073741824, 256MiB or 1GiB
// (binary units KiB, MiB, GiB, TiB only).
func parseSize(s string) (uint64, error) {
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}}
	mult := uint64(1)
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || n > (1<<63)/mult {
		return 0, usagef("size %q: want a positive number of bytes, optionally with KiB, MiB, GiB or TiB", s)
	}
	return n * mult, nil
}
