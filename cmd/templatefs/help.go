package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// printCommands writes the command list: the usage line, one line per
// command, and how to get a command's help.
func printCommands(w io.Writer) {
	fmt.Fprintf(w, "usage: templatefs COMMAND [FLAGS] [ARGUMENTS]\n\nCommands:\n")
	width := len("help [COMMAND]")
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-*s  %s\n", width, "help [COMMAND]", "this list, or a command's usage, flags and an example")
	fmt.Fprint(w, `
"templatefs COMMAND --help" (or -h) prints a command's usage, its flags with
their defaults, and an example. Flags may come before or after the
arguments; everything after "--" is an argument. Exit status: 0 done,
1 failed (the message names the file and the reason), 2 bad command line.
publish, push, pull, fsck, verify, settings and fleet work the same while
STORE is mounted: they run through the daemon that serves it.
`)
}

// printHelp writes cmd's help, for -h and --help: its usage line, what it
// does, every flag defined on fl with its meaning and default, and an
// example.
func printHelp(w io.Writer, cmd command, fl *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\n", synopsis(cmd, fl), cmd.about)
	printFlags(w, cmd, fl)
	fmt.Fprintf(w, "\nExample:\n  %s\n", cmd.example)
}

// printUsage writes cmd's usage, after a usage error: its usage line and
// flags, and where to find the rest.
func printUsage(w io.Writer, cmd command, fl *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n", synopsis(cmd, fl))
	printFlags(w, cmd, fl)
	fmt.Fprintf(w, "\n\"templatefs %s --help\" says more, with an example.\n", cmd.name)
}

// printFlags writes every flag defined on fl, with its meaning and its
// default (defaultText), and -h/--help.
func printFlags(w io.Writer, cmd command, fl *flag.FlagSet) {
	if len(cmd.args) == 0 {
		fmt.Fprintln(w, "Flags (-flag and --flag are the same):")
	} else {
		fmt.Fprintln(w, "Flags, before or after the arguments (-flag and --flag are the same):")
	}
	fl.VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  %s\n%s", flagSynopsis(f), wrap(usage+" "+defaultText(cmd, f), "        ", 80))
	})
	fmt.Fprintf(w, "  -h, --help\n        print this help and exit\n")
}

// synopsis is cmd's usage line: the command, its flags (optional ones in
// brackets) and its positional arguments.
func synopsis(cmd command, fl *flag.FlagSet) string {
	parts := []string{"templatefs", cmd.name}
	fl.VisitAll(func(f *flag.Flag) {
		if slices.Contains(cmd.required, f.Name) {
			parts = append(parts, flagSynopsis(f))
		} else {
			parts = append(parts, "["+flagSynopsis(f)+"]")
		}
	})
	parts = append(parts, cmd.args...)
	if cmd.more != "" {
		parts = append(parts, "["+cmd.more+"...]")
	}
	return strings.Join(parts, " ")
}

// flagSynopsis is how f is written on a command line: --name, and the
// name of its value unless it is a boolean flag.
func flagSynopsis(f *flag.Flag) string {
	if value, _ := flag.UnquoteUsage(f); value != "" {
		return "--" + f.Name + " " + value
	}
	return "--" + f.Name
}

// defaultText says what f is when not given: "(required)" for a flag cmd
// requires, what leaving it out means for an empty default cmd.unset
// explains ("(default: no HTTP endpoint)"), otherwise "(default " and its
// default value ")".
func defaultText(cmd command, f *flag.Flag) string {
	if slices.Contains(cmd.required, f.Name) {
		return "(required)"
	}
	if f.DefValue == "" && cmd.unset[f.Name] != "" {
		return "(default: " + cmd.unset[f.Name] + ")"
	}
	return "(default " + f.DefValue + ")"
}

// wrap breaks text into lines of at most width characters where it can
// (a word longer than that gets a line of its own), each starting with
// indent and ending with a newline.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}
