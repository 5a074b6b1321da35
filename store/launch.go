package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// LaunchEnv is the environment variable through which an orchestrator
// hands a lease's launch ID (Lease.LaunchID) to the clone it starts. A
// process carrying it names the reservation it was started for, so that
// the lease is found, and bound, even if the orchestrator crashed between
// starting the clone and writing `pid N` (BindLaunched).
//
// The daemon reads a process's environment from /proc/<pid>/environ: the
// initial environment the process was started with (execve(2)), not what
// it later changes with setenv(3). A process that unsets the variable
// still carries it; one that sets it after start does not.
const LaunchEnv = "TEMPLATEFS_LAUNCH_ID"

// errNoEnviron is launchOf's and launchCarriers' error where this build
// does not read other processes' environments (Windows, where it would
// take the target's PEB).
var errNoEnviron = errors.New("reading another process's environment is not supported on this platform")

// BindLaunched is the bind at a payload open (the supervisor seam): if
// the opener pid (the FUSE request's, a thread ID or a process ID)
// carries LaunchEnv in its initial environment and the value is the
// launch ID of a Reserved lease on generation gen, it binds that lease to
// the opener's process on the one bind path (BindLeaseSeq's checks: the
// identity is read through a pidfd, and the generation's eligibility is
// checked again in the binding transaction). matched reports whether the
// opener carries the launch ID of a lease on gen.
//
// Nothing is bound, and the open goes on as any other (matched false, nil
// error), when the opener carries no launch ID (backup tools, readers),
// its environment cannot be read (another user's process while the
// daemon is not root, or /proc with hidepid: logged at debug level), or
// the launch ID names no lease on gen (a lease on another generation, a
// cancelled or released one). A lease already bound, to the opener or
// (after a concurrent open) to another process, is left alone: matched
// is true with a nil error. Errors: BindLeaseSeq's (matched true), among
// them ErrTombstoned, ErrRetiring and ErrIneligible when the generation
// may not be restored now; the lease then stays Reserved.
//
// Finding the lease reads only gen's own lease rows, and decodes only a
// record whose bytes hold the launch ID, and only for an opener that
// carries one: opens by other processes cost one read of
// /proc/<pid>/environ.
func (s *Store) BindLaunched(gen GenerationID, pid int) (lease Lease, matched bool, err error) {
	if pid <= 0 || pid == os.Getpid() {
		return Lease{}, false, nil
	}
	launch, tgid, err := launchOf(pid)
	switch {
	case errors.Is(err, ErrNoProcess):
		return Lease{}, false, nil
	case err != nil:
		s.log.Debug("opener's launch ID unreadable; open without binding", "pid", pid, "err", err)
		return Lease{}, false, nil
	case launch == "":
		return Lease{}, false, nil
	}
	s.awaitLaunch(launch)
	lease, found, err := s.leaseByLaunch(gen, launch)
	switch {
	case err != nil:
		return Lease{}, false, fmt.Errorf("find the lease of launch ID %s on generation %s: %w", launch, gen, err)
	case !found:
		return Lease{}, false, nil
	case lease.State != Reserved:
		return lease, true, nil
	}
	bound, err := s.bindLease(lease.CloneID, lease.Seq, tgid, bindByLaunch)
	switch {
	case errors.Is(err, ErrLeaseBound):
		s.log.Info("lease bound by a concurrent open; this open goes on without binding", "clone", lease.CloneID, "pid", tgid, "err", err)
		return lease, true, nil
	case err != nil:
		return lease, true, err
	}
	return bound, true, nil
}

// leaseByLaunch returns the lease on gen whose launch ID is launch.
func (s *Store) leaseByLaunch(gen GenerationID, launch string) (lease Lease, found bool, err error) {
	if !validLaunchID(launch) {
		return Lease{}, false, nil
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		gl := tx.Bucket(bucketGenerationLeases).Bucket(genKey(gen))
		if gl == nil {
			return nil
		}
		leases := tx.Bucket(bucketLeases)
		c := gl.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			l, _, err := getLease(leases, k)
			if err != nil {
				return err
			}
			if l.LaunchID == launch && l.Generation == gen {
				lease, found = l, true
				return nil
			}
		}
		return nil
	})
	return lease, found, err
}

// validLaunchID reports whether v has the form of a launch ID: 32
// lowercase hex digits (newLaunchID).
func validLaunchID(v string) bool {
	if len(v) != 32 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// launchValue returns the value of LaunchEnv in a NUL-separated
// environment block (/proc/<pid>/environ), or "" if it is not set. The
// first definition wins, as getenv(3) finds it.
func launchValue(environ []byte) string {
	prefix := []byte(LaunchEnv + "=")
	for entry := range bytes.SplitSeq(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(entry, prefix); ok {
			return string(v)
		}
	}
	return ""
}
