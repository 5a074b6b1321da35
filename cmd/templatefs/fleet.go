package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"templatefs/internal/fleet"
	"templatefs/store"
)

// fleetStore is the host's store as internal/fleet sees it.
type fleetStore struct{ st *store.Store }

func (f fleetStore) Held() ([]fleet.Held, error) {
	held, err := f.st.FleetHeld()
	out := make([]fleet.Held, len(held))
	for i, h := range held {
		out[i] = fleet.Held{FleetID: h.FleetID, Generation: h.Generation.String(), KeyID: h.KeyID, State: string(h.State)}
	}
	return out, err
}

func (f fleetStore) Saved() (fleet.Saved, error) {
	fs, err := f.st.FleetState()
	saved := fleet.Saved{Revision: fs.Revision}
	for _, q := range fs.Queue {
		saved.Queued = append(saved.Queued, fleet.Queued(q))
	}
	return saved, err
}

func (f fleetStore) Apply(id string, value []byte, rev int64, own bool) error {
	return f.st.ApplyFleet(id, value, rev, own)
}

func (f fleetStore) Resync(rev int64, tombstones map[string][]byte) error {
	return f.st.ResyncFleet(rev, tombstones)
}

func (f fleetStore) Dequeue(q fleet.Queued) error { return f.st.FleetDequeue(store.FleetQueued(q)) }

// checkFleetFlags refuses, as usage errors and before the store is
// opened, the fleet flags of mount that cannot work: --fleet-prefix
// without --fleet-etcd (it would be ignored), a prefix that does not
// start and end with "/", and an etcd endpoint that is not a client URL
// (http://HOST:PORT, https://HOST:PORT) or HOST:PORT.
func checkFleetFlags(fl *flag.FlagSet, endpoints, prefix string) error {
	if endpoints == noFleet {
		if isSet(fl, "fleet-prefix") {
			return usagef("--fleet-prefix %q: only with --fleet-etcd", prefix)
		}
		return nil
	}
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return usagef("--fleet-prefix %q: want a key prefix that starts and ends with /", prefix)
	}
	for _, e := range strings.Split(endpoints, ",") {
		if !isEndpoint(e) {
			return usagef("--fleet-etcd: %q is not an etcd client URL: want http://HOST:PORT, https://HOST:PORT or HOST:PORT, comma-separated", e)
		}
	}
	return nil
}

// isEndpoint says whether e is an etcd client endpoint: an http or https
// URL with a host and nothing after it but "/", or HOST:PORT.
func isEndpoint(e string) bool {
	if u, err := url.Parse(e); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return u.Host != "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && u.User == nil
	}
	host, port, err := net.SplitHostPort(e)
	return err == nil && host != "" && port != ""
}

// isSet says whether the command line set flag name of fl.
func isSet(fl *flag.FlagSet, name string) bool {
	set := false
	fl.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// member is this daemon's fleet membership, nil when it has not joined
// one: `templatefs fleet status` run through the daemon reports it.
var member atomic.Pointer[fleet.Member]

// joinFleet joins the fleet at endpoints (comma-separated etcd client
// URLs) under prefix with st as this host's store, and returns the
// member, whose State MNT/store shows, and its stop (register it with
// daemon.OnStop). Every tombstone, lift, publication and retirement of
// the store kicks the member, so a change made on this host reaches etcd
// at once while it is connected.
func joinFleet(st *store.Store, endpoints, prefix string) (*fleet.Member, func(), error) {
	info, err := st.Info()
	if err != nil {
		return nil, nil, err
	}
	hostname, _ := os.Hostname()
	m, err := fleet.Join(fleet.Config{
		Endpoints: strings.Split(endpoints, ","), Prefix: prefix,
		HostID: info.StoreID, Hostname: hostname, StoreDir: st.Dir(),
	}, fleetStore{st})
	if err != nil {
		return nil, nil, usagef("--fleet-etcd: %v", err)
	}
	member.Store(m)
	events := st.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	kicked := make(chan struct{})
	go func() {
		defer close(kicked)
		for {
			evs, missed, err := events.Next(ctx)
			if err != nil {
				return
			}
			kick := missed > 0 // a missed event may have been one of these
			for _, e := range evs {
				switch e.Kind {
				case store.EventTombstoned, store.EventLifted, store.EventPublished, store.EventRetirementStarted, store.EventRetirementFinished:
					kick = true
				}
			}
			if kick {
				m.Kick()
			}
		}
	}()
	slog.Info("fleet: joining", "endpoints", endpoints, "prefix", prefix, "host", info.StoreID)
	return m, func() {
		cancel()
		<-kicked
		events.Close()
		member.Store(nil)
		m.Stop()
	}, nil
}

// fleetLines renders m's state for MNT/store.
func fleetLines(m *fleet.Member) func() []string {
	return func() []string {
		s := m.State()
		state := "disconnected"
		if s.Connected {
			state = "connected"
		}
		lines := []string{
			"fleet: " + state,
			"fleet_since: " + s.Since.UTC().Format(time.RFC3339Nano),
			fmt.Sprintf("fleet_revision: %d", s.Revision),
			fmt.Sprintf("fleet_queued: %d", s.Queued),
		}
		if !s.Connected {
			lines = append(lines, "fleet_error: "+s.Err)
		}
		return lines
	}
}

// noReason is --reason's default: no reason given.
const noReason = "none"

// Actions of `templatefs fleet`.
const (
	fleetTombstone = "tombstone"
	fleetLift      = "lift"
	fleetStatus    = "status"
)

// prepareFleet parses `templatefs fleet ACTION STORE [ID...]`. tombstone
// and lift queue the change durably in the store for the fleet (the
// daemon joined to the fleet writes it to etcd at once, or when etcd is
// back) and apply it to the store's own generations of that template;
// each ID is a generation of the store (g000001) or a fleet ID. status
// prints the daemon's link to the fleet and every generation's fleet ID.
func prepareFleet(fl *flag.FlagSet, args []string) (storeOp, error) {
	reason := fl.String("reason", noReason, "`TEXT` saying why, recorded with the tombstone or lift in etcd")
	pos, err := parseFlags(fl, args)
	if err != nil {
		return storeOp{}, err
	}
	action, dir, ids := pos[0], pos[1], pos[2:]
	for _, id := range ids {
		if _, err := store.ParseGenerationID(id); err != nil && !fleet.ValidID(id) {
			return storeOp{}, usagef("ID %q is not a generation ID (such as g000001) nor a fleet ID (64 lowercase hex digits)", id)
		}
	}
	switch action {
	case fleetTombstone, fleetLift:
		if len(ids) == 0 {
			return storeOp{}, usagef("fleet %s: name at least one generation or fleet ID", action)
		}
	case fleetStatus:
		if len(ids) > 0 {
			return storeOp{}, usagef("fleet status takes no ID")
		}
	default:
		return storeOp{}, usagef("fleet %q: want %s, %s or %s", action, fleetTombstone, fleetLift, fleetStatus)
	}
	why := *reason
	if why == noReason {
		why = ""
	}
	run := func(st *store.Store, out opOutput) error {
		if action == fleetStatus {
			return printFleetStatus(st, out)
		}
		for _, id := range ids {
			fleetID, err := resolveFleetID(st, id)
			if err != nil {
				return err
			}
			gens, err := st.QueueFleet(store.FleetQueued{FleetID: fleetID, Tombstone: action == fleetTombstone, Reason: why, UID: uint32(os.Getuid())})
			if err != nil {
				return err
			}
			names := make([]string, len(gens))
			for i, g := range gens {
				names[i] = g.String()
			}
			if len(names) == 0 {
				names = []string{"none held here"}
			}
			fmt.Fprintf(out.stdout, "%s %s (generations: %s): queued for the fleet\n", action, fleetID, strings.Join(names, " "))
		}
		if m := member.Load(); m != nil {
			m.Kick()
		}
		return nil
	}
	return storeOp{dir: dir, args: commandLine(fl, append([]string{action, absPath(dir)}, ids...)...), run: run}, nil
}

// resolveFleetID returns id if it is a fleet ID, else the fleet ID of the
// store's generation id.
func resolveFleetID(st *store.Store, id string) (string, error) {
	if fleet.ValidID(id) {
		return id, nil
	}
	gen, err := store.ParseGenerationID(id)
	if err != nil {
		return "", err
	}
	g, err := st.Generation(gen)
	if err != nil {
		return "", err
	}
	return g.FleetID(), nil
}

// printFleetStatus prints the link to the fleet (through a daemon that
// joined one; otherwise "not joined") with the store's fleet revision and
// queue, then one line per generation: ID, fleet ID, state.
func printFleetStatus(st *store.Store, out opOutput) error {
	fs, err := st.FleetState()
	if err != nil {
		return err
	}
	link := "not joined (templatefs mount --fleet-etcd)"
	if m := member.Load(); m != nil {
		link = strings.Join(fleetLines(m)(), "\n")
	} else {
		link = "fleet: " + link + fmt.Sprintf("\nfleet_revision: %d\nfleet_queued: %d", fs.Revision, len(fs.Queue))
	}
	fmt.Fprintln(out.stdout, link)
	held, err := st.FleetHeld()
	if err != nil {
		return err
	}
	for _, h := range held {
		fmt.Fprintf(out.stdout, "%s %s %s\n", h.Generation, h.FleetID, h.State)
	}
	return nil
}
