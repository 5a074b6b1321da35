package store

import "time"

// GenerationState is the lifecycle state of a generation.
type GenerationState string

const (
	// Published: leases may be acquired while the generation is eligible
	// (Store.Eligibility).
	Published GenerationState = "published"
	// Tombstoned: quarantined; no new leases, granted leases keep working.
	// Lift returns it to Published; Retire moves it on to Retiring.
	Tombstoned GenerationState = "tombstoned"
	// Retiring: a tombstoned generation whose retirement intent is recorded.
	// It gets no new leases and cannot be lifted; its payload stays readable
	// until its last lease is released or Exited, then it is deleted. Its
	// Exited leases stay, naming it, until each is released.
	Retiring GenerationState = "retiring"
)

// Artifact describes one payload file of a generation.
type Artifact struct {
	Name   string `json:"name"`   // manifest.bin, state.bin, memory.bin or scratch.img
	Size   int64  `json:"size"`   // logical length in bytes
	SHA256 string `json:"sha256"` // lowercase hex SHA-256 of all Size bytes, holes read as zero
}

// Tombstone records who quarantined a generation and when.
type Tombstone struct {
	At  time.Time `json:"at"`
	UID uint32    `json:"uid"` // the caller's user ID
}

// RetirementIntent records who asked for a generation's retirement and
// when. It is the durable source of truth for the deletion that follows.
type RetirementIntent struct {
	At  time.Time `json:"at"`
	UID uint32    `json:"uid"` // the caller's user ID
}

// Generation is the index record of one published capture. Records are
// returned by value; callers may keep them.
type Generation struct {
	ID              GenerationID    `json:"id"`     // the store generation (publication ID)
	KeyID           string          `json:"key_id"` // 64 lowercase hex digits
	State           GenerationState `json:"state"`
	PublishedAt     time.Time       `json:"published_at"`
	Tombstone       *Tombstone      `json:"tombstone,omitempty"`
	ManifestVersion uint32          `json:"manifest_version"` // 5 or 6
	// CaptureTime is the capture's own clock: the v6 time contract's UTC
	// anchor, or the v5 capture wall clock (created_at for a standard
	// machine). Capture metadata, not part of the key.
	CaptureTime time.Time  `json:"capture_time"`
	Artifacts   []Artifact `json:"artifacts"` // manifest.bin first, then as the manifest lists them
	// Anchors are the capture's time anchors, from which eligibility is
	// computed (Store.Eligibility).
	Anchors TimeAnchors `json:"anchors"`
	// Retirement is set when the generation enters state Retiring.
	Retirement *RetirementIntent `json:"retirement,omitempty"`
	// StateChangedAt is when the state last changed (tombstone, lift,
	// retirement). Zero until the first change, and in records written
	// before the field existed. A change of the generation's lease set is
	// recorded apart, so a lease does not rewrite this record
	// (Store.LeasesChangedAt).
	StateChangedAt time.Time `json:"state_changed_at,omitzero"`
}

// LastChange is when anything g's record shows last changed: the latest
// of its publication, tombstone, retirement and StateChangedAt.
func (g *Generation) LastChange() time.Time {
	t := g.PublishedAt
	for _, c := range []time.Time{g.StateChangedAt, tombstoneAt(g.Tombstone), retirementAt(g.Retirement)} {
		if c.After(t) {
			t = c
		}
	}
	return t
}

func tombstoneAt(t *Tombstone) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.At
}

func retirementAt(r *RetirementIntent) time.Time {
	if r == nil {
		return time.Time{}
	}
	return r.At
}

// Artifact returns the named artifact record and whether it exists.
func (g *Generation) Artifact(name string) (Artifact, bool) {
	for _, a := range g.Artifacts {
		if a.Name == name {
			return a, true
		}
	}
	return Artifact{}, false
}

// KeyRecord is a compatibility key known to the store.
type KeyRecord struct {
	ID        string    `json:"id"`        // 64 lowercase hex digits
	Seq       uint64    `json:"seq"`       // order of first use in this store, from 1; stable, usable as an inode source
	Canonical string    `json:"canonical"` // the canonical key text (templatekey.Key.Text)
	CreatedAt time.Time `json:"created_at"`
	// GenerationRemovedAt is when a retired generation of the key was last
	// deleted; zero if none was.
	GenerationRemovedAt time.Time `json:"generation_removed_at,omitzero"`
}

// LeaseState is the lifecycle state of a lease.
type LeaseState string

// Lease states. A lease moves Reserved -> Bound (BindLease), then to
// Exited when the daemon sees its process exit (TrackExits), and leaves
// the index when its clone has verifiably exited (ReleaseLease,
// KillLease); there is no expiry. Releasing and TeardownFailed return to
// Bound or stay as they are (see ReleaseLease and KillLease) until their
// process exits, which makes them Exited too.
const (
	// Reserved: durable before the clone exists; not yet bound to a
	// process. Releasing it needs no check: its clone never started.
	Reserved LeaseState = "reserved"
	// Bound: bound to the process in Lease.Process; released only once
	// that process has verifiably exited.
	Bound LeaseState = "bound"
	// Releasing: a release was durably begun and the exit check has not
	// ended (it is running, or the daemon died during it); the next
	// release verifies again.
	Releasing LeaseState = "releasing"
	// TeardownFailed: KillLease sent SIGKILL and the process was still
	// there when the bounded wait ended. The lease stays until a release
	// verifies exit.
	TeardownFailed LeaseState = "teardown-failed"
	// Exited: the bound process has verifiably exited, as the daemon saw
	// it (TrackExits: the process's pidfd polled readable, or at start a
	// verdict of Processes.Check). The lease stays listed and readable
	// until a release removes it, but it no longer holds its generation:
	// a retiring generation whose leases are all Exited is deleted.
	Exited LeaseState = "exited"
)

// Lease binds one clone to one generation until the clone has verifiably
// exited. It never expires by timeout.
type Lease struct {
	CloneID    string       `json:"clone_id"`
	Generation GenerationID `json:"store_generation"` // the store generation (publication ID)
	KeyID      string       `json:"key_id"`
	// Seq is a store-wide, strictly increasing number assigned when the
	// lease is acquired (a fencing token, like Chubby's sequencer); it is
	// also the lease's stable inode source.
	Seq       uint64     `json:"seq"`
	LaunchID  string     `json:"launch_id"` // 16 random bytes, lowercase hex
	CreatedAt time.Time  `json:"created_at"`
	State     LeaseState `json:"state"`
	// Process is the process the lease is bound to: nil while Reserved,
	// set by BindLease and kept until the lease is released.
	Process *ProcessIdentity `json:"process,omitempty"`
	// BoundAt is when BindLease bound the lease; zero while Reserved.
	BoundAt time.Time `json:"bound_at,omitzero"`
	// UpdatedAt is when State last changed; zero until the first change
	// after acquisition (CreatedAt).
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// ExitedAt is when the exit was recorded (State Exited): at once
	// when the daemon saw it, else when the next daemon started; zero
	// otherwise.
	ExitedAt time.Time `json:"exited_at,omitzero"`
	// Exit is the verdict that established the exit (ExitVerdict.String:
	// "exited", "pid-reused", "earlier-boot"); empty unless Exited.
	Exit string `json:"exit,omitempty"`
	// CheckError is why the daemon could not tell whether the bound
	// process has exited when it last looked (for example /proc hides
	// it): the lease then stays as it is. Empty once a look succeeds.
	CheckError string `json:"check_error,omitempty"`
}

// Info summarises a store for MNT/store.
type Info struct {
	StoreID        string    // 16 random bytes made at Init (new ones at Restore), lowercase hex
	RestoredFrom   string    // the store ID of the backup Restore built this store from, lowercase hex; "" if made by Init
	SchemaIdentity string    // SchemaIdentity
	SchemaVersion  uint32    // SchemaVersion
	CreatedAt      time.Time // when Init ran
	Generations    int       // all generations, any state
	Tombstoned     int       // of which tombstoned
	Retiring       int       // of which retiring
	Keys           int
	Leases         int
	Settings       Settings // the eligibility policy (Store.Settings)
	// ChangedAt is when anything Info shows last changed: the latest
	// creation, publication or state change of a generation
	// (Generation.LastChange), lease granted or released
	// (Store.LeasesChangedAt), deletion of a generation (KeyRecord.
	// GenerationRemovedAt) or settings change.
	ChangedAt time.Time
}
