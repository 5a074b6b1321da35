package store

import (
	"os"
	"syscall"
)

// FailpointEnv names the environment variable that arms a fail point: when
// it equals a fail point's name, the process kills itself with SIGKILL on
// reaching that point. Crash tests set it on a real templatefs process and
// then check that reopening the store recovers. Names in use:
// publish-reserved, publish-copied-<artifact>, publish-renamed,
// lease-committed, tombstone-committed.
const FailpointEnv = "TEMPLATEFS_FAILPOINT"

var armedFailpoint = os.Getenv(FailpointEnv)

func failpoint(name string) {
	if armedFailpoint != "" && armedFailpoint == name {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not delivered synchronously; never return
	}
}
