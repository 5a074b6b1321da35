package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"
	bolt "go.etcd.io/bbolt"

	"templatefs/internal/hostclock"
)

// Names inside a store directory.
const (
	IndexFile  = "index.db" // the bbolt index
	PayloadDir = "payload"  // payload/<gen>/<artifact>, immutable once renamed in
	StagingDir = "staging"  // publication work area, emptied at Open
	LockFile   = "lock"     // flock target; holds the owner's pid as text
	// ControlSocket is the Unix socket a daemon serving the store takes
	// commands on (package internal/control); a stale one may remain after
	// a daemon is killed.
	ControlSocket = "control.sock"
)

// Options tunes a Store. The zero value is ready to use.
type Options struct {
	// Logger receives recovery and refusal lines; nil means slog.Default().
	Logger *slog.Logger
	// Now returns the current time for record timestamps; nil means
	// hostclock.Now, the clock the host facts are read from.
	Now func() time.Time
	// Processes identifies, checks and kills the processes leases are
	// bound to; nil means the host's (pidfds on Linux). Tests inject
	// outcomes that real processes cannot produce. Exit tracking watches
	// processes only through the host's (TrackExits).
	Processes Processes
	// Host reads the host identity and clocks that eligibility depends
	// on; nil means this host (ReadHostFacts). Tests pass fixtures.
	Host Host
	// NoRecover makes Open change nothing in the store: it neither removes
	// publication leftovers nor resumes interrupted retirements, so that a
	// read-only Check (templatefs fsck) reports them instead. Check with
	// Repair fixes them.
	NoRecover bool
	// Fleet makes every Tombstone and Lift also queue the change for the
	// fleet (fleet/queue, QueueFleet) in its own transaction, for a
	// daemon that has joined one (templatefs mount --fleet-etcd).
	Fleet bool
	// Observer is told what the store does, for metrics; nil means
	// nobody is.
	Observer Observer
}

// Store is an open template store. It is safe for concurrent use by
// multiple goroutines; bbolt serialises writers. A call that returns nil
// after changing state has fsynced every payload file and directory it
// wrote and committed its bbolt transaction: the change survives SIGKILL
// and power loss. A call that returns an error leaves the index unchanged.
type Store struct {
	dir  string
	root *os.File // dir itself, open from Open to Close: payloads are opened relative to it
	db   *index
	lock *flock.Flock
	log  *slog.Logger
	now  func() time.Time
	uid  int

	procs Processes
	host  Host
	fleet bool // Options.Fleet: local tombstones and lifts are queued (fleet.go)

	// commits runs lease acquisitions as group commits (commit.go).
	commits *groupCommitter
	// reserved holds the leases granted and not yet committed
	// (reserve.go).
	reserved reservations

	// obs is told what the store does (observer.go); counts keeps the
	// records per state for it (statecounts.go), and countsWalk
	// serialises their first walk.
	obs        Observer // Options.Observer, or nil: observer()
	counts     stateCounts
	countsWalk sync.Mutex

	// maint serialises retirement deletions with Check, so Check never
	// sees a generation half deleted.
	maint sync.Mutex
	// pubMu guards publishing: the IDs of publications in progress.
	pubMu      sync.Mutex
	publishing map[GenerationID]bool
	// incomingLinks is held by PublishIncoming while the payload files it
	// links still have their incoming names (openPayloadFile).
	incomingLinks sync.RWMutex

	// readOnly is set once, by setReadOnly (readonly.go).
	readOnly atomic.Pointer[readOnlyError]

	// interrupted ends long steps once set (Interrupt, progress.go).
	interrupted atomic.Bool

	// events fans state changes out to subscribers (events.go).
	events events

	// exits is the running exit tracking, nil when none (exits.go).
	exits atomic.Pointer[exitTracker]
}

// Init creates a new, empty store in dir: the directory itself (mode 0700)
// if missing, the payload and staging areas, and an index holding the
// schema identity, version and a random 128-bit store ID. dir must be
// missing or empty. It returns ErrExists if dir holds anything, and
// ErrUnsafePath if dir is a symbolic link or is not private to the caller,
// or a directory above it lets another user replace it (checkParents).
// The store starts with DefaultSettings (see InitWithSettings).
func Init(dir string) error { return initStore(dir, nil) }

// initStore is Init, also writing set into meta/settings when not nil.
func initStore(dir string, set *Settings) error {
	abs, err := filepath.Abs(dir)
	if err == nil {
		_, err = checkParents(abs, os.Geteuid())
	}
	if err != nil {
		return fmt.Errorf("init store: %w", err)
	}
	if err := mkdirPrivate(dir); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("init store %s: %w", dir, err)
	}
	if err := checkPrivate(dir); err != nil {
		return fmt.Errorf("init store: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("init store %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("init store %s: directory is not empty (holds %q): %w", dir, entries[0].Name(), ErrExists)
	}
	for _, sub := range []string{PayloadDir, StagingDir} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return fmt.Errorf("init store: %w", err)
		}
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("init store: store ID: %w", err)
	}
	db, err := bolt.Open(filepath.Join(dir, IndexFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("init store %s: %w", filepath.Join(dir, IndexFile), err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		for _, kv := range [][2][]byte{
			{keyIdentity, []byte(SchemaIdentity)},
			{keyVersion, binary.BigEndian.AppendUint32(nil, SchemaVersion)},
			{keyStoreID, id[:]},
			{keyCreated, []byte(hostclock.Now().UTC().Format(time.RFC3339Nano))},
		} {
			if err := meta.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		if set != nil {
			if err := writeSettings(tx, *set, hostclock.Now()); err != nil {
				return err
			}
		}
		for _, b := range indexBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("init store %s: %w", dir, err)
	}
	// The store's own entries, then its name in the parent: a store that
	// Init reported made survives power loss whole.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("init store %s: %w", dir, err)
		}
	}
	return nil
}

// Open opens the store in dir for exclusive use by this process. It
// checks, in order: that no other user can replace a directory on the way
// to dir (checkParents: every ancestor owned by root or the caller, and
// not writable by others unless sticky with the next component the
// caller's or root's; symbolic links above dir are resolved and Dir
// returns the resolved path), that dir is private to the caller and no
// symbolic link (ErrUnsafePath), that no other process holds the lock
// (ErrStoreInUse, naming its pid), that every path in the store is
// private to the caller and no symbolic link (ErrUnsafePath, checked
// under the lock, so a store in use is refused without walking the tree
// its owner is changing), and that the index carries
// SchemaIdentity and SchemaVersion (ErrNotStore, ErrSchemaUnknown,
// ErrSchemaUnversioned, ErrSchemaTooOld, ErrSchemaTooNew, each naming what
// was found) and valid settings (ErrInvalidSettings). An index of an
// older schema that a step of migrate.go reads is first migrated, in
// durable batches that a crash leaves resumable (ErrMigration for a row
// it cannot read; with opts.NoRecover it is refused, ErrSchemaTooOld). Before bbolt maps
// the index it checks the file's structure (ErrIndexCorrupt names the
// file, the damage and how to restore). It then removes publication
// leftovers (everything in staging/ and payload directories with no
// generation record) and finishes retirements a crash interrupted
// (Retire), unless opts.NoRecover. A payload directory the index cannot
// explain (an ID above its publication sequence, a name that is no
// generation ID) makes it refuse with ErrPayloadAhead before anything
// is removed. When one of the index's two meta pages is invalid (a meta
// write torn by a crash, or damage) bbolt uses the other; Open then logs
// a warning and removes no payload directory (Check reports them). The
// store directory stays open until Close; payload files are opened
// relative to it (OpenPayload).
func Open(dir string, opts Options) (*Store, error) {
	// An absolute path keeps payload opens working if the process changes
	// directory later (libfuse's daemon setup may chdir to /).
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{dir: dir, log: opts.Logger, now: opts.Now, uid: os.Geteuid(), procs: opts.Processes, fleet: opts.Fleet, obs: opts.Observer}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = hostclock.Now
	}
	if s.procs == nil {
		s.procs = hostProcesses()
	}
	s.host = opts.Host
	if s.host == nil {
		s.host = HostFunc(ReadHostFacts)
	}
	if dir, err = checkParents(dir, s.uid); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s.dir = dir
	// The directory itself before its lock file is made in it; the rest
	// of the tree once the lock is held, so a store in use is refused
	// without a walk that the owner's changes (a retirement removing a
	// payload directory) would race with.
	if err := checkPrivate(dir); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, IndexFile)); err != nil {
		return nil, fmt.Errorf("open store %s: no %s: %w", dir, IndexFile, ErrNotStore)
	}
	s.lock = flock.New(filepath.Join(dir, LockFile), flock.SetPermissions(0o600))
	locked, err := s.lock.TryLock()
	if err != nil {
		return nil, fmt.Errorf("open store %s: lock: %w", dir, err)
	}
	if !locked {
		owner := "pid " + strings.TrimSpace(readLockOwner(filepath.Join(dir, LockFile)))
		if owner == "pid " { // it has the lock but has not written its pid yet
			owner = "another process"
		}
		return nil, fmt.Errorf("open store %s: %w by %s (stop that templatefs mount or command first)", dir, ErrStoreInUse, owner)
	}
	if err := checkTree(dir); err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := writeLockOwner(filepath.Join(dir, LockFile), os.Getpid()); err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("open store %s: record lock owner: %w", dir, err)
	}
	s.db, err = openIndex(s, filepath.Join(dir, IndexFile))
	if err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s.reserved.byClone = map[string]*Reservation{}
	s.commits = newGroupCommitter(func(fn func(*bolt.Tx) error) error { return s.update(faultLeaseCommit, fn) })
	s.commits.observe = s.observer().GroupCommit
	if s.root, err = openDir(dir); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := migrateIndex(s.db, opts.NoRecover, s.log.Info); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if err := checkSchema(tx); err != nil {
			return err
		}
		_, err := readSettings(tx)
		return err
	}); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if s.db.otherMeta != nil {
		s.log.Warn("index meta page invalid; bbolt uses the other one: if the invalid one was the newer, its commit is lost", "index", s.db.Path(), "meta", s.db.otherMeta.Error())
	}
	if opts.NoRecover {
		return s, nil
	}
	if err := s.removePublicationLeftovers(s.db.otherMeta != nil); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: recover: %w", dir, err)
	}
	if err := s.recoverIncoming(); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: recover incoming: %w", dir, err)
	}
	if err := s.resumeRetirements(); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: resume retirements: %w", dir, err)
	}
	return s, nil
}

// checkSchema reads meta/identity and meta/version before any other row.
func checkSchema(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("index has no %q bucket: %w", bucketMeta, ErrSchemaUnknown)
	}
	identity := meta.Get(keyIdentity)
	if identity == nil {
		return fmt.Errorf("index has no schema identity: %w", ErrSchemaUnknown)
	}
	if !bytes.Equal(identity, []byte(SchemaIdentity)) {
		return fmt.Errorf("schema identity %q, want %q: %w", identity, SchemaIdentity, ErrSchemaUnknown)
	}
	v := meta.Get(keyVersion)
	if len(v) != 4 {
		return fmt.Errorf("schema %q version row is %d bytes, want 4: %w", identity, len(v), ErrSchemaUnversioned)
	}
	switch version := binary.BigEndian.Uint32(v); {
	case version < SchemaVersion:
		return fmt.Errorf("schema %q version %d, this build reads %d: %w", identity, version, SchemaVersion, ErrSchemaTooOld)
	case version > SchemaVersion:
		return fmt.Errorf("schema %q version %d, this build reads %d: %w", identity, version, SchemaVersion, ErrSchemaTooNew)
	}
	for _, b := range indexBuckets {
		if tx.Bucket(b) == nil {
			return fmt.Errorf("schema %q version %d lacks bucket %q: %w", identity, SchemaVersion, b, ErrSchemaUnknown)
		}
	}
	if len(meta.Get(keyStoreID)) != 16 {
		return fmt.Errorf("store ID is %d bytes, want 16: %w", len(meta.Get(keyStoreID)), ErrSchemaUnknown)
	}
	return nil
}

// Close releases the index and the lock. The Store must not be used after.
func (s *Store) Close() error {
	if t := s.exits.Swap(nil); t != nil {
		t.stop()
	}
	s.events.closeAll()
	s.reserved.commits.Wait() // each ends its reservation, committed or not
	var err error
	if s.db != nil {
		err = s.db.Close()
	}
	if s.root != nil {
		if rerr := s.root.Close(); err == nil {
			err = rerr
		}
	}
	if s.lock != nil {
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
	}
	return err
}

// Dir returns the store directory as an absolute path.
func (s *Store) Dir() string { return s.dir }

// OwnerUID returns the user ID that owns the store (the opening user).
func (s *Store) OwnerUID() int { return s.uid }

// laterOf returns the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Info returns the store's identity and record counts from one read
// transaction.
func (s *Store) Info() (Info, error) {
	var info Info
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		info.StoreID = hex.EncodeToString(meta.Get(keyStoreID))
		info.RestoredFrom = hex.EncodeToString(meta.Get(keyRestoredFrom))
		info.SchemaIdentity = string(meta.Get(keyIdentity))
		info.SchemaVersion = binary.BigEndian.Uint32(meta.Get(keyVersion))
		info.CreatedAt, _ = time.Parse(time.RFC3339Nano, string(meta.Get(keyCreated)))
		info.Keys = tx.Bucket(bucketKeys).Stats().KeyN
		info.Leases = tx.Bucket(bucketLeases).Stats().KeyN
		var err error
		if info.Settings, err = readSettings(tx); err != nil {
			return err
		}
		info.ChangedAt = laterOf(info.CreatedAt, readSettingsChanged(tx))
		if err := tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
			var key struct {
				GenerationRemovedAt time.Time `json:"generation_removed_at"`
			}
			if _, err := getJSON(tx.Bucket(bucketKeys), k, &key); err != nil {
				return err
			}
			info.ChangedAt = laterOf(info.ChangedAt, key.GenerationRemovedAt)
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketGenerations).ForEach(func(k, v []byte) error {
			var g struct { // the state and times only: no artifacts decoded
				State          GenerationState   `json:"state"`
				PublishedAt    time.Time         `json:"published_at"`
				Tombstone      *Tombstone        `json:"tombstone"`
				Retirement     *RetirementIntent `json:"retirement"`
				StateChangedAt time.Time         `json:"state_changed_at"`
			}
			if _, err := getJSON(tx.Bucket(bucketGenerations), k, &g); err != nil {
				return err
			}
			full := Generation{PublishedAt: g.PublishedAt, Tombstone: g.Tombstone, Retirement: g.Retirement, StateChangedAt: g.StateChangedAt}
			info.ChangedAt = laterOf(info.ChangedAt, full.LastChange())
			info.ChangedAt = laterOf(info.ChangedAt, leasesChangedAt(tx.Bucket(bucketGenerationLeases).Bucket(k)))
			info.Generations++
			switch g.State {
			case Tombstoned:
				info.Tombstoned++
			case Retiring:
				info.Retiring++
			}
			return nil
		})
	})
	return info, err
}
