package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"templatefs/internal/hostclock"
)

// DefaultPrefix is the etcd key prefix of a fleet unless Config.Prefix
// says otherwise.
const DefaultPrefix = "/templatefs/"

// Defaults of Config's intervals.
const (
	DefaultProbe = 500 * time.Millisecond // how often a connected host checks that etcd answers
	DefaultRetry = 500 * time.Millisecond // how long a disconnected host waits between attempts
	hostTTL      = 10                     // seconds: the host's etcd lease (catalog and host record)
	opTimeout    = 2 * time.Second        // one etcd request
)

// Store is what a fleet member needs of its host's store. Every change
// must be committed durably before the call returns.
type Store interface {
	// Held lists the generations the store holds.
	Held() ([]Held, error)
	// Saved returns the fleet revision the store's view reflects and its
	// queued changes.
	Saved() (Saved, error)
	// Apply records the fleet's tombstone of fleetID at revision rev
	// (value nil: lifted) and quarantines (or lifts) the store's
	// generations of that template, unless own: the change is this host's
	// own, come back through the watch, and the store applied it before it
	// queued it (a later local change may have followed it since).
	Apply(fleetID string, value []byte, rev int64, own bool) error
	// Resync replaces the view with every tombstone the fleet has at
	// revision rev, applying the differences.
	Resync(rev int64, tombstones map[string][]byte) error
	// Dequeue removes q from the queue once etcd has it.
	Dequeue(q Queued) error
}

// Held is one generation of the store, by fleet identity.
type Held struct {
	FleetID    string
	Generation string
	KeyID      string
	State      string
}

// Queued is a tombstone or lift this host set that etcd does not have yet.
type Queued struct {
	FleetID   string
	Tombstone bool // false: lift
	Reason    string
	UID       uint32
	At        time.Time
}

// Saved is the fleet state the store keeps.
type Saved struct {
	Revision int64
	Queued   []Queued
}

// Config says which fleet a host joins and as whom.
type Config struct {
	Endpoints []string // etcd client URLs
	Prefix    string   // key prefix, ending in "/"; "" means DefaultPrefix
	HostID    string   // this host's ID in the fleet: its store ID
	Hostname  string
	StoreDir  string
	Probe     time.Duration // 0 means DefaultProbe
	Retry     time.Duration // 0 means DefaultRetry
	Logger    *slog.Logger  // nil means slog.Default()
}

// State is a member's view of its link to the fleet, for MNT/store and
// the metrics.
type State struct {
	Connected bool      // the watch is established and caught up with etcd
	Since     time.Time // when Connected last changed (or the member started)
	Revision  int64     // the etcd revision the store's fleet view reflects
	Queued    int       // this host's changes etcd does not have yet
	Err       string    // why the member is disconnected, if it is
}

// Member is a host's membership of a fleet: one goroutine that keeps a
// session with etcd, and falls back to what the store knows when etcd
// cannot be reached. The zero value is not usable; use Join.
type Member struct {
	cfg  Config
	keys keys
	st   Store
	cli  *clientv3.Client
	log  *slog.Logger
	kick chan struct{}

	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	state State
	lease clientv3.LeaseID // the current session's, 0 when none
}

// Join starts a membership of the fleet cfg names, with st as the host's
// store, and returns at once: a host whose etcd is unreachable serves
// and leases with what its store knows, and joins when etcd answers.
// Errors: a Config that cannot be used (no endpoints, a bad prefix).
func Join(cfg Config, st Store) (*Member, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("fleet: no etcd endpoint")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("fleet: prefix %q: want a key prefix that starts and ends with /", cfg.Prefix)
	}
	if cfg.Probe <= 0 {
		cfg.Probe = DefaultProbe
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("fleet: etcd client for %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{
		cfg: cfg, keys: keys{cfg.Prefix}, st: st, cli: cli, log: cfg.Logger,
		kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
		state: State{Since: hostclock.Now(), Err: "not connected yet"},
	}
	go m.run(ctx)
	return m, nil
}

// Kick tells the member that the store changed (a tombstone or lift was
// queued, a generation published or retired): it writes the queue and
// the catalog to etcd at once if it is connected.
func (m *Member) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// State returns the member's link to the fleet, with the revision and
// queue length the store has now.
func (m *Member) State() State {
	m.mu.Lock()
	s := m.state
	m.mu.Unlock()
	if saved, err := m.st.Saved(); err == nil {
		s.Revision, s.Queued = saved.Revision, len(saved.Queued)
	}
	return s
}

// Stop ends the membership: the session ends, the host's etcd lease is
// revoked (at most opTimeout; its catalog entries go with it, else they
// expire with the lease) and the client is closed. Queued changes stay in
// the store for the next daemon.
func (m *Member) Stop() {
	m.cancel()
	<-m.done
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		m.cli.Revoke(ctx, lease)
		cancel()
	}
	m.cli.Close()
}

// run keeps a session until Stop, reconnecting after every loss.
func (m *Member) run(ctx context.Context) {
	defer close(m.done)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := m.session(ctx)
		if ctx.Err() != nil {
			return
		}
		m.setConnected(false, err)
		if attempt == 0 {
			s := m.State()
			m.log.Warn("fleet: etcd unreachable; serving and leasing with the fleet state this store knows",
				"endpoints", strings.Join(m.cfg.Endpoints, ","), "revision", s.Revision, "queued", s.Queued, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.cfg.Retry):
		}
	}
}

// setConnected records a change of the link (err: why it is down).
func (m *Member) setConnected(connected bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if m.state.Connected != connected {
		m.state.Since = hostclock.Now()
		if connected {
			m.log.Info("fleet: connected", "endpoints", strings.Join(m.cfg.Endpoints, ","), "prefix", m.cfg.Prefix)
		} else {
			m.log.Warn("fleet: disconnected; serving and leasing with the fleet state this store knows", "err", msg)
		}
	}
	m.state.Connected, m.state.Err = connected, msg
}

// opCtx bounds one etcd request.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}
