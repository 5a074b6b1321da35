package store

import "golang.org/x/sys/unix"

// renameNoReplace renames directory from to to, failing with EEXIST if to
// exists (renameat2 RENAME_NOREPLACE). The caller fsyncs both parents.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
