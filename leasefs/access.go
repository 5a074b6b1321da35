package leasefs

import "fmt"

// Caller is who asks for an operation: the credentials the kernel reports
// for the requesting process (FUSE request header, WinFsp's caller).
// Mutating methods take one; reads do not, since any user the kernel lets
// through may read (others only with allow_other).
type Caller struct {
	UID uint32
}

// authorize returns ErrAccess (wrapped, naming what and both uids) unless
// c is the store owner or root: only they may change the tree (project
// issue 3). Without default_permissions the kernel checks no modes, so
// this is the one check.
func (f *FS) authorize(c Caller, what string) error {
	if c.UID == 0 || c.UID == f.uid {
		return nil
	}
	return fmt.Errorf("%s by uid %d (store owner %d): %w", what, c.UID, f.uid, ErrAccess)
}
