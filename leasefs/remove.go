package leasefs

import "fmt"

// CheckRemove answers, before any change, whether c may remove name from
// dir by some operation: a lease file (unlink releases it) or a
// generation directory (rmdir retires it, rename tombstones or lifts it).
// It exists for WinFsp, which asks it as access(DELETE_OK) when a delete
// or a rename starts and ignores the result of the unlink that Windows
// runs when the last handle closes (winfsp issue #515,
// fuse-and-store-notes.md §G3): so for a lease it also asks the store
// whether the release would be refused now (store.CheckRelease), and a
// delete the release would refuse fails for the caller at once. A
// generation directory gets no such check, since DELETE_OK also precedes
// `move` (a tombstone or a lift), and Windows refuses to delete a
// directory that is not empty anyway.
//
// Errors: ErrAccess, the Lookup errors, ErrNotPermitted for every other
// node, and for a lease CheckRelease's store.ErrLeaseReserved,
// store.ErrProcessAlive,
// store.ErrProcessUninspectable or its check's error. A bound process
// can exit or a lease be bound between this answer and the unlink; the
// unlink's own refusal is then only logged and shown in status.
func (f *FS) CheckRemove(dir Node, name string, c Caller) error {
	if err := f.enter("remove"); err != nil {
		return err
	}
	defer f.leave()
	if err := f.authorize(c, fmt.Sprintf("remove %q from %s", name, dir)); err != nil {
		return err
	}
	n, err := f.Lookup(dir, name)
	switch {
	case err != nil:
		return err
	case n.kind == KindIncomingFile || n.kind == KindIncomingEntryDir:
		return nil // removed and renamed like files of any directory
	case n.kind != KindLeaseFile && n.kind != KindGenerationDir:
		return fmt.Errorf("remove %s: only lease files and generation directories leave their directory: %w", n, ErrNotPermitted)
	case n.kind == KindLeaseFile:
		if err := f.st.CheckRelease(n.name, n.num); err != nil {
			return fmt.Errorf("remove %s: %w", n, err)
		}
	}
	return nil
}
