package leasefs

import (
	"fmt"
	"slices"
)

// Caller is who asks for an operation: the credentials the kernel reports
// for the requesting process (FUSE request header, WinFsp's caller).
// Mutating methods take one; reads do not, since any user the kernel lets
// through may read (others only with allow_other).
type Caller struct {
	UID uint32
	// PID is the requesting thread or process as the kernel reports it
	// (the FUSE request header's pid, fuse_get_context's pid), in the
	// daemon's PID namespace; 0 when unknown. A payload open uses it to
	// bind a lease by launch ID (store.BindLaunched).
	PID int
}

// authorize returns ErrAccess (wrapped, naming what and the uids) unless
// c may change the tree: c.UID is one of the owners, by default the store
// owner and root (project issue 3), else those SetOwners gave. Without
// default_permissions the kernel checks no modes, so this is the one
// check.
func (f *FS) authorize(c Caller, what string) error {
	if mayChange(c.UID, f.owners) {
		return nil
	}
	return fmt.Errorf("%s by uid %d (may change: uids %v): %w", what, c.UID, f.owners, ErrAccess)
}

// mayChange reports whether uid is one of owners.
func mayChange(uid uint32, owners []uint32) bool {
	return slices.Contains(owners, uid)
}

// SetOwners replaces the uids that may change the tree, for an adapter
// whose callers do not come in the store's uid space: on Windows WinFsp
// reports each caller as its own mapping of the caller's SID to a uid, so
// the WinFsp adapter passes that mapping of the store owner (the daemon's
// user) and of LocalSystem. An empty list lets no one change anything.
// Call it before the mount serves: it is not safe for use concurrently
// with other methods.
func (f *FS) SetOwners(uids []uint32) { f.owners = slices.Clone(uids) }
