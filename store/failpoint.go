package store

import "os"

// FailpointEnv names the environment variable that arms a fail point: when
// it equals a fail point's name, the process kills itself on reaching that
// point (SIGKILL on Linux; TerminateProcess with exit code 137 on
// Windows). Crash tests set it on a real templatefs process and then
// check that reopening the store recovers. Names in use:
// publish-reserved, publish-copied-<artifact>, publish-renamed,
// lease-committed (AcquireLease, AcquireLeaseByKey), tombstone-committed,
// lift-committed, retire-intent-committed, retire-record-deleted,
// retire-payload-deleted, settings-committed, repair-index-committed,
// bind-committed, release-marked (Releasing committed, exit not yet
// checked), release-committed, kill-signalled (after SIGKILL and the
// bounded wait, before the release).
const FailpointEnv = "TEMPLATEFS_FAILPOINT"

var armedFailpoint = os.Getenv(FailpointEnv)

func failpoint(name string) {
	if armedFailpoint != "" && armedFailpoint == name {
		killSelf()
		select {} // the kill is not synchronous; never return
	}
}
