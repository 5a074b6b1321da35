package store

import "errors"

// Errors returned when a store is created or opened.
var (
	// ErrStoreInUse is returned by Open when another process holds the
	// store's lock; the message names that process's pid.
	ErrStoreInUse = errors.New("store is in use")
	// ErrClosed: the store, or an event stream of it, was closed.
	ErrClosed = errors.New("store is closed")
	// ErrInterrupted: a long step (a publication's copy, a digest check)
	// was ended by Store.Interrupt: the daemon is stopping.
	ErrInterrupted = errors.New("interrupted: the daemon is stopping; run the command again once a daemon serves the store")
	// ErrNotStore is returned by Open when the directory has no index.
	ErrNotStore = errors.New("not a templatefs store")
	// ErrSchemaUnknown is returned by Open when the index carries no schema
	// identity, or one other than SchemaIdentity.
	ErrSchemaUnknown = errors.New("unknown store schema")
	// ErrSchemaUnversioned is returned by Open when the identity is present
	// but the version row is missing or malformed.
	ErrSchemaUnversioned = errors.New("store schema has no version")
	// ErrSchemaTooOld is returned by Open when the schema version is older
	// than SchemaVersion.
	ErrSchemaTooOld = errors.New("store schema is older than this build")
	// ErrSchemaTooNew is returned by Open when the schema version is newer
	// than SchemaVersion.
	ErrSchemaTooNew = errors.New("store schema is newer than this build")
	// ErrMigration is returned by Open when an index of an older schema
	// holds a row that cannot be migrated to SchemaVersion; the message
	// names the row. The index keeps every row it had.
	ErrMigration = errors.New("store index cannot be migrated")
	// ErrIndexCorrupt is returned by Open when the index file is damaged
	// (truncated, both meta pages invalid, a page tree bbolt could not
	// walk safely, a freelist naming pages in use), and by any call that
	// finds damage while the store is open, which also makes the store
	// read-only. The message names the file, what is wrong and how to
	// restore the store from a backup.
	ErrIndexCorrupt = errors.New("index is damaged")
	// ErrPayloadAhead is returned by Open when payload/ holds directories
	// the index cannot explain: IDs above the index's publication
	// sequence, or names that are no generation ID. The index is older
	// than the payloads (rolled back or swapped); the message names the
	// directories and nothing is deleted.
	ErrPayloadAhead = errors.New("payload directories the index does not know")
	// ErrUnsafePath is returned by Init and Open when a path in the store is
	// a symbolic link, is owned by another user, or is group- or
	// world-writable, or a directory above the store lets another user
	// replace it; and by OpenPayload for a payload file with more than one
	// hard link or reached through a symbolic link. The message names the
	// path (and a mode as ls prints it).
	ErrUnsafePath = errors.New("unsafe store path")
	// ErrExists is returned by Init when the directory already holds a store
	// or other files.
	ErrExists = errors.New("already exists")
	// ErrBackupMismatch is returned by Restore when a backed-up payload is
	// missing, has another size, or its SHA-256 differs from the digest its
	// generation record holds, or the index names an artifact that is not a
	// capture's file. The message names the file and both values.
	ErrBackupMismatch = errors.New("backup does not match its index")
)

// Errors returned by settings.
var (
	// ErrInvalidSettings is returned by SetSettings and InitWithSettings
	// for a restore window outside (0, MaxRestoreWindow], and by Open,
	// Settings and eligibility decisions when the stored settings row is
	// malformed or names an unknown field.
	ErrInvalidSettings = errors.New("invalid store settings")
)

// Errors returned by publication.
var (
	// ErrCapture is returned by Publish when the capture directory or its
	// manifest is refused; the wrapped chain carries the manifest package's
	// sentinel (for example manifest.ErrUnexpectedArtifact).
	ErrCapture = errors.New("capture refused")
	// ErrCaptureChanged is returned by Publish and PublishIfNew when an
	// artifact's size, mtime or ctime changed while the capture was read,
	// or the copied manifest.bin differs from the one validated: a writer
	// was at work, and the copy could mix old and new bytes. The message
	// names the artifact and what changed. No generation is made; the
	// reserved ID, if any, stays burned.
	ErrCaptureChanged = errors.New("capture changed while it was read")
)

// Errors returned by lookups, leases and tombstones.
var (
	// ErrNotFound is returned when a generation, key or lease does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalidID is returned when a generation ID, key ID or clone ID is
	// malformed (see ParseGenerationID, ValidateCloneID).
	ErrInvalidID = errors.New("invalid identifier")
	// ErrTombstoned is returned by AcquireLease when the generation is
	// tombstoned: no new leases are granted on it.
	ErrTombstoned = errors.New("generation is tombstoned")
	// ErrLeaseConflict is returned by AcquireLease when the clone ID already
	// holds a lease on another generation.
	ErrLeaseConflict = errors.New("clone already holds a lease on another generation")
	// ErrNotTombstoned is returned by Retire when the generation is
	// published: only a tombstoned generation may be retired.
	ErrNotTombstoned = errors.New("generation is not tombstoned")
	// ErrRetiring is returned by Lift, AcquireLease and AcquireLeaseByKey
	// when the generation is retiring: it is past quarantine.
	ErrRetiring = errors.New("generation is retiring")
	// ErrIneligible is returned by AcquireLease and AcquireLeaseByKey when
	// the generation (or every generation of the key) is outside its
	// restore window or refused by the store's policy; the message gives
	// the reason, as Eligibility.Reason does.
	ErrIneligible = errors.New("ineligible")
	// ErrLeaseBound is returned by BindLease when the lease is already
	// bound to another process.
	ErrLeaseBound = errors.New("lease is bound to another process")
	// ErrNoProcess is returned by BindLease when no process has the PID,
	// the PID names a thread that is not a thread-group leader, or the
	// process has already exited.
	ErrNoProcess = errors.New("no such process")
	// ErrProcessAlive is returned by ReleaseLease when the lease's bound
	// process is still running; the lease stays.
	ErrProcessAlive = errors.New("bound process is alive")
	// ErrProcessUninspectable is returned by BindLease, ReleaseLease and
	// KillLease when the process exists but the daemon may not read its
	// identity (for example /proc mounted with hidepid), so its exit
	// cannot be verified; the lease stays.
	ErrProcessUninspectable = errors.New("process cannot be inspected")
	// ErrTeardownFailed is returned by KillLease when the bound process
	// could not be signalled or was still there when the bounded wait
	// ended; the lease stays in state TeardownFailed.
	ErrTeardownFailed = errors.New("forced teardown failed")
	// ErrLeaseReserved is returned by ReleaseLease and KillLease for a
	// Reserved lease: it has no process to verify or kill, and only an
	// explicit CancelLease ends it (so that no copy-then-delete, such as
	// mv out of the mount, ends a reservation). The lease stays.
	ErrLeaseReserved = errors.New("lease is reserved: only cancel ends it")
	// ErrLaunchInUse is returned by CancelLease while a process on this
	// boot carries the lease's launch ID (LaunchEnv) in its environment:
	// the clone it was handed to may still bind it. The lease stays.
	ErrLaunchInUse = errors.New("a process carries the lease's launch ID")
)
