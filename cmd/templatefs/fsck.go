package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"templatefs/store"
)

// prepareFsck parses fsck's command line. Its operation checks the
// store's invariants (store.Check) and prints each problem on its own
// line (store.Problem.String). The command opens the store with
// store.Options.NoRecover, so without --repair nothing in it changes:
// publication leftovers and interrupted retirements, which a normal open
// would clean up silently, are reported instead. With --repair the
// problems Check can fix are fixed and printed with " (repaired)".
// A damaged index (store.ErrIndexCorrupt, at open or while checking) is
// printed as a problem of its own kind, index-corrupt, and never
// repaired. Run by a daemon, on the store it serves, the same checks and
// repairs apply (a publication in progress is not a leftover); a problem
// Check could repair but the daemon's store refused to (it is read-only
// since a failed write) is printed with what to do: stop the daemon,
// then run fsck --repair. Exit status: 0 when no problem remains (none
// found, or all repaired), 1 when any unrepaired problem remains or the
// store cannot be checked.
func prepareFsck(fl *flag.FlagSet, args []string) (storeOp, error) {
	digests := fl.Bool("digests", false, "also recompute every artifact's SHA-256 (reads every payload byte)")
	repair := fl.Bool("repair", false, "fix what can be fixed without guessing (index rows that disagree with their records, publication leftovers, unfinished retirements, stray payload files) and mark those lines (repaired)")
	pos, err := parseFlags(fl, args)
	if err != nil {
		return storeOp{}, err
	}
	dir := pos[0]
	run := func(st *store.Store, out opOutput) error {
		opts := store.CheckOptions{Digests: *digests, Repair: *repair}
		if *digests {
			opts.Progress = out.progress("hash")
		}
		problems, err := st.Check(opts)
		err = indexCorrupt(out.stdout, err)
		needsOffline := out.online && errors.Is(err, store.ErrReadOnly)
		unrepaired := 0
		for _, p := range problems {
			fmt.Fprintln(out.stdout, p)
			if !p.Repaired {
				unrepaired++
			}
			if needsOffline && p.Repairable && !p.Repaired {
				fmt.Fprintf(out.stdout, "  %s %s needs the store unmounted: stop the daemon, then run fsck --repair\n", p.Kind, p.Subject)
			}
		}
		if err != nil {
			return err
		}
		if unrepaired > 0 {
			return fmt.Errorf("%s: %d %s found, %d not repaired: %w", dir, len(problems), plural(len(problems), "problem"), unrepaired, errUnrepaired)
		}
		return nil
	}
	return storeOp{dir: dir, open: store.Options{NoRecover: true}, args: commandLine(fl, dir), run: run, openFailed: indexCorrupt}, nil
}

// indexCorrupt prints err as an index-corrupt problem line if it is
// store.ErrIndexCorrupt, and returns it.
func indexCorrupt(stdout io.Writer, err error) error {
	if errors.Is(err, store.ErrIndexCorrupt) {
		fmt.Fprintln(stdout, store.Problem{Kind: store.ProblemIndexCorrupt, Subject: store.IndexFile, Detail: err.Error()})
	}
	return err
}

// settingsFlags are the eligibility policy flags shared by init and
// settings (store.Settings).
type settingsFlags struct {
	fl        *flag.FlagSet
	window    *string
	reboot    *bool
	otherHost *bool
}

// addSettingsFlags defines the settings flags on fl, with the defaults of
// a new store (store.DefaultSettings). With unchanged, as for `settings`,
// help says instead that a flag not given leaves its setting as it is.
func addSettingsFlags(fl *flag.FlagSet, unchanged bool) settingsFlags {
	def := store.DefaultSettings()
	sf := settingsFlags{
		fl:        fl,
		window:    fl.String("restore-window", formatWindow(def.RestoreWindow), "largest age `D` a generation may have and get new leases: a duration such as 72h or whole days such as 7d, at most 30d"),
		reboot:    fl.Bool("refuse-reboot", def.RefuseReboot, "refuse captures from an earlier boot of this host, or without host identity (--refuse-reboot=false allows them)"),
		otherHost: fl.Bool("refuse-other-host", def.RefuseOtherHost, "refuse captures from another host, or without host identity (--refuse-other-host=false allows them)"),
	}
	if unchanged {
		for _, name := range []string{"restore-window", "refuse-reboot", "refuse-other-host"} {
			fl.Lookup(name).DefValue = "unchanged" // DefValue is only for help
		}
	}
	return sf
}

// formatWindow writes a restore window as parseWindow reads it: whole days
// as 7d, anything else as a Go duration.
func formatWindow(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// apply returns base with the flags given on the command line applied,
// and whether any was given. A window that does not parse or is out of
// range (store.Settings.Validate) is a usage error.
func (sf settingsFlags) apply(base store.Settings) (store.Settings, bool, error) {
	set, given := base, false
	var err error
	sf.fl.Visit(func(f *flag.Flag) {
		given = true
		switch f.Name {
		case "restore-window":
			set.RestoreWindow, err = parseWindow(*sf.window)
		case "refuse-reboot":
			set.RefuseReboot = *sf.reboot
		case "refuse-other-host":
			set.RefuseOtherHost = *sf.otherHost
		}
	})
	if err != nil {
		return store.Settings{}, false, err
	}
	if verr := set.Validate(); verr != nil {
		return store.Settings{}, false, usagef("%v", verr)
	}
	return set, given, nil
}

// parseWindow parses a restore window: a Go duration (72h, 90m) or a whole
// number of days with the suffix d (7d).
func parseWindow(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err == nil && n > 0 && n <= math.MaxInt64/int64(24*time.Hour) {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	return 0, usagef("--restore-window %q: want a duration such as 72h or a number of days such as 7d", s)
}

// printSettings writes set as the "key: value" lines MNT/store shows.
func printSettings(w io.Writer, set store.Settings) {
	fmt.Fprintf(w, "restore_window: %v\nrefuse_reboot: %t\nrefuse_other_host: %t\n",
		set.RestoreWindow, set.RefuseReboot, set.RefuseOtherHost)
}

// prepareSettings parses settings' command line. Its operation prints
// the store's eligibility settings, after changing the ones given as
// flags (store.SetSettings). Without flags the command opens the store
// with store.Options.NoRecover and nothing in it changes.
func prepareSettings(fl *flag.FlagSet, args []string) (storeOp, error) {
	sf := addSettingsFlags(fl, true)
	pos, err := parseFlags(fl, args)
	if err != nil {
		return storeOp{}, err
	}
	// Flags are validated against the defaults first, so a bad value is a
	// usage error before the store is opened.
	if _, _, err := sf.apply(store.DefaultSettings()); err != nil {
		return storeOp{}, err
	}
	given := fl.NFlag() > 0
	run := func(st *store.Store, out opOutput) error {
		set, err := st.Settings()
		if err != nil {
			return err
		}
		if given {
			if set, _, err = sf.apply(set); err != nil {
				return err
			}
			if err := st.SetSettings(set); err != nil {
				return err
			}
		}
		printSettings(out.stdout, set)
		return nil
	}
	return storeOp{dir: pos[0], open: store.Options{NoRecover: !given}, args: commandLine(fl, pos[0]), run: run}, nil
}

// plural is noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
