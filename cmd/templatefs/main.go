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
	"sort"
	"strconv"
	"strings"
)

// usageError marks a bad command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// command is one subcommand: its one-line synopsis and its entry point,
// which receives the arguments after the command name.
type command struct {
	synopsis string // the command line, for usage messages
	summary  string // what it does, one line
	run      func(args []string, stdout io.Writer) error
}

var commands = map[string]command{
	"init":           {"init [--restore-window D] [--refuse-reboot] [--refuse-other-host] STORE", "create an empty store", runInit},
	"fsck":           {"fsck [--digests] [--repair] STORE", "check the store's invariants; exit 1 if a problem remains", runFsck},
	"settings":       {"settings [--restore-window D] [--refuse-reboot=BOOL] [--refuse-other-host=BOOL] STORE", "show or change the eligibility settings", runSettings},
	"sample-capture": {"sample-capture [--version 6|5] [--memory SIZE] OUTDIR", "write a valid capture and class", runSampleCapture},
	"publish":        {"publish STORE CAPTURE_DIR --class CLASS_JSON", "publish a capture; prints the generation ID last", runPublish},
	"mount":          {"mount [--backend go-fuse|cgofuse] [--allow-other] [--no-passthrough] [--debug] STORE MNT", "serve the store at MNT until SIGINT/SIGTERM", runMount},
	"demo":           {"demo", "make a sample store, mount it, explain what to try", runDemo},
	"restore":        {"restore BACKUP_DIR STORE", "rebuild a store from a backup of the mount (store.db and payloads), verifying every digest", runRestore},
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "templatefs: unknown command %q\n", args[0])
		printUsage(stderr)
		return 2
	}
	err := cmd.run(args[1:], stdout)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "templatefs %s: %v\nusage: templatefs %s\n", args[0], err, cmd.synopsis)
		return 2
	default:
		fmt.Fprintf(stderr, "templatefs %s: %v\n", args[0], err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: templatefs COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %s\n      %s\n", commands[name].synopsis, commands[name].summary)
	}
}

// parseFlags parses args with fs, allowing flags before and after the
// positional arguments, and checks that exactly want positionals remain.
func parseFlags(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != want {
		return nil, usagef("want %d arguments, got %d", want, len(pos))
	}
	for i, p := range pos {
		if p == "" {
			return nil, usagef("argument %d is empty", i+1)
		}
	}
	return pos, nil
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
