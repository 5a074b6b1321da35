package leasefs

import "fmt"

// CheckRemove answers, before any change, whether c may remove name from
// dir by some operation: a lease file (unlink releases it) or a
// generation directory (rmdir retires it, rename tombstones or lifts it).
// It exists for WinFsp, which asks it as access(DELETE_OK) before a
// delete or a rename and may ignore the result of the unlink that
// follows (fuse-and-store-notes.md §G3); the operation itself can still
// be refused by the store (a live bound process, a published generation).
// Errors: ErrAccess, the Lookup errors, ErrNotPermitted for every other
// node.
func (f *FS) CheckRemove(dir Node, name string, c Caller) error {
	if err := f.authorize(c, fmt.Sprintf("remove %q from %s", name, dir)); err != nil {
		return err
	}
	n, err := f.Lookup(dir, name)
	switch {
	case err != nil:
		return err
	case n.kind != KindLeaseFile && n.kind != KindGenerationDir:
		return fmt.Errorf("remove %s: only lease files and generation directories leave their directory: %w", n, ErrNotPermitted)
	}
	return nil
}
