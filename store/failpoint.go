package store

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// FailpointEnv names the environment variable that arms one fail point,
// read once at process start; unarmed, a fail point costs one comparison.
//
// TEMPLATEFS_FAILPOINT=<name> arms a kill point: the process kills itself
// on reaching it (SIGKILL on Linux; TerminateProcess with exit code 137 on
// Windows). Crash tests set it on a real templatefs process and then
// check that reopening the store recovers. Kill points sit after a step,
// most after a commit. Names in use:
// publish-reserved, publish-copied-<artifact>, publish-renamed,
// lease-committed (the group commit of a reserved lease, ReserveLease,
// ReserveLeaseByKey), lease-awaited (Reservation.Wait entered: a close of
// the creating descriptor, before the lease's commit is known to have
// ended), tombstone-committed,
// lift-committed, retire-intent-committed, retire-record-deleted,
// retire-payload-deleted, settings-committed, repair-index-committed,
// bind-committed, release-marked (Releasing committed, exit not yet
// checked), release-committed, kill-signalled (after SIGKILL and the
// bounded wait, before the release), exit-recorded (a bound process's
// exit committed as state exited, by the tracker or at its start),
// incoming-committed (PublishIncoming: generation committed, its incoming
// names not yet removed; a publication of an incoming directory passes
// the publish-* points too), autobind-committed (a bind at a payload
// open, BindLaunched), cancel-committed (CancelLease),
// pull-midway-<artifact> (a pull's download of the artifact, after
// MidwayBytes of its data are written; tests/e2e TestPullResume kills a
// real pull there, since it needs a registry), migrate-committed (after each commit of a schema migration, migrate.go).
const FailpointEnv = "TEMPLATEFS_FAILPOINT"

// TEMPLATEFS_FAILPOINT=<name>:ENOSPC or <name>:EIO arms an error point
// (faultPoint) instead: the step it guards fails with that errno, a real
// syscall.Errno (errors.Is(err, syscall.ENOSPC) holds), every time it is
// reached, without being attempted. Error points sit before a durable
// step, so the error is what the step itself would have returned and the
// operation acknowledges nothing. A value that names no fail point, or an
// unknown errno, arms nothing and is reported on stderr at start.
var armed = parseFailpoint(os.Getenv(FailpointEnv))

// armedPoint is the parsed FailpointEnv: a kill point's name, or an error
// point and its errno.
type armedPoint struct {
	kill  string
	fault faultPoint // noFault unless an error point is armed
	errno syscall.Errno
}

// faultErrnos are the errnos an error point can be armed with.
var faultErrnos = map[string]syscall.Errno{"ENOSPC": syscall.ENOSPC, "EIO": syscall.EIO}

// parseFailpoint reads a FailpointEnv value; see FailpointEnv.
func parseFailpoint(v string) armedPoint {
	name, errno, isFault := strings.Cut(v, ":")
	if !isFault {
		return armedPoint{kill: v}
	}
	p, ok := faultPointNamed(name)
	e, known := faultErrnos[errno]
	if !ok || !known {
		fmt.Fprintf(os.Stderr, "templatefs: %s=%q arms nothing: want <error point>:ENOSPC or <error point>:EIO, error points are %s\n",
			FailpointEnv, v, strings.Join(faultPointNames[1:], ", "))
		return armedPoint{}
	}
	return armedPoint{fault: p, errno: e}
}

// failpoint kills the process if kill point name is armed.
func failpoint(name string) {
	if armed.kill != "" && armed.kill == name {
		killSelf()
		select {} // the kill is not synchronous; never return
	}
}

// faultPoint is an error point: a place just before a durable step
// (payload write, fsync of a file or directory, rename, index commit)
// where an armed errno is returned instead of taking the step. Each
// constant is one place in the code; faultPointNames gives the names
// FailpointEnv uses.
type faultPoint int

// Error points, by write path.
const (
	noFault faultPoint = iota

	faultPublishReserve     // publication: commit of the reserved ID
	faultPayloadWrite       // publication and restore: an artifact's first write
	faultPayloadFsync       // publication and restore: an artifact's fsync
	faultPublishFsyncStage  // publication: fsync of staging/<gen>/
	faultPublishRename      // publication: rename of staging/<gen> to payload/<gen>
	faultPublishFsyncParent // publication: fsync of staging/ and payload/ after the rename
	faultPublishCommit      // publication: commit of the generation record
	faultLeaseCommit        // lease creation (the group commit of a reservation: ReserveLease, ReserveLeaseByKey)
	faultBindCommit         // BindLease
	faultReleaseBegin       // ReleaseLease, KillLease: commit of Releasing (or of a Reserved lease's deletion)
	faultReleaseFinish      // ReleaseLease, KillLease: commit of the lease's deletion
	faultLeaseState         // a refused release restoring the prior state; a failed kill recording teardown-failed
	faultExitCommit         // exit tracking: commit of exits (state exited) or of a check error
	faultTombstoneCommit    // Tombstone
	faultLiftCommit         // Lift
	faultRetireIntent       // Retire: commit of the intent
	faultRetireDelete       // retirement: commit of the record's deletion
	faultRetireRemove       // retirement: removal of payload/<gen>/
	faultRetireFsync        // retirement: fsync of payload/ after the removal
	faultSettingsCommit     // SetSettings
	faultRepairCommit       // Check with Repair: commit of the index fixes
	faultRepairRemove       // Check with Repair: removal of a leftover or unexpected file
	faultRepairFsync        // Check with Repair: fsync of the directory after a removal
	faultRestoreIndexWrite  // Restore: copy of the index snapshot
	faultRestoreIndexFsync  // Restore: fsync of the copied index
	faultRestorePayloadDir  // Restore: fsync of a restored payload/<gen>/
	faultRestoreFsyncDirs   // Restore: fsync of payload/, staging/ and the new store directory
	faultRestoreRename      // Restore: rename of the built store to its place
	faultRestoreFsyncParent // Restore: fsync of the store's parent after the rename
	faultAutoBindCommit     // BindLaunched: commit of a bind at a payload open
	faultCancelCommit       // CancelLease: commit of the reserved lease's deletion
	faultFleetQueueCommit   // QueueFleet, FleetDequeue: commit of the fleet queue
	faultFleetViewCommit    // ApplyFleet, ResyncFleet: commit of the fleet view and revision

	numFaultPoints
)

// faultPointNames are the FailpointEnv names of the error points.
var faultPointNames = [numFaultPoints]string{
	noFault:                 "",
	faultPublishReserve:     "publish-reserve-commit",
	faultPayloadWrite:       "payload-write",
	faultPayloadFsync:       "payload-fsync",
	faultPublishFsyncStage:  "publish-fsync-staging",
	faultPublishRename:      "publish-rename",
	faultPublishFsyncParent: "publish-fsync-parents",
	faultPublishCommit:      "publish-commit",
	faultLeaseCommit:        "lease-commit",
	faultBindCommit:         "bind-commit",
	faultReleaseBegin:       "release-begin-commit",
	faultReleaseFinish:      "release-finish-commit",
	faultLeaseState:         "lease-state-commit",
	faultExitCommit:         "exit-commit",
	faultTombstoneCommit:    "tombstone-commit",
	faultLiftCommit:         "lift-commit",
	faultRetireIntent:       "retire-intent-commit",
	faultRetireDelete:       "retire-delete-commit",
	faultRetireRemove:       "retire-remove-payload",
	faultRetireFsync:        "retire-fsync-payload",
	faultSettingsCommit:     "settings-commit",
	faultRepairCommit:       "repair-index-commit",
	faultRepairRemove:       "repair-remove",
	faultRepairFsync:        "repair-fsync",
	faultRestoreIndexWrite:  "restore-write-index",
	faultRestoreIndexFsync:  "restore-fsync-index",
	faultRestorePayloadDir:  "restore-fsync-payload",
	faultRestoreFsyncDirs:   "restore-fsync-dirs",
	faultRestoreRename:      "restore-rename",
	faultRestoreFsyncParent: "restore-fsync-parent",
	faultAutoBindCommit:     "autobind-commit",
	faultCancelCommit:       "cancel-commit",
	faultFleetQueueCommit:   "fleet-queue-commit",
	faultFleetViewCommit:    "fleet-view-commit",
}

func (p faultPoint) String() string { return faultPointNames[p] }

// faultPointNamed returns the error point called name.
func faultPointNamed(name string) (faultPoint, bool) {
	for p := noFault + 1; p < numFaultPoints; p++ {
		if faultPointNames[p] == name {
			return p, true
		}
	}
	return noFault, false
}

// fault returns the errno armed at p, or nil when p is not armed. The
// caller returns it as the step's own error, wrapped as that step wraps
// its errors.
func fault(p faultPoint) error {
	if p == armed.fault {
		return armed.errno
	}
	return nil
}
