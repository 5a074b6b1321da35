package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"templatefs/leasefs"
	"templatefs/store"
)

// runRestore rebuilds a store from a backup of the mount: BACKUP_DIR is a
// copy of the mount tree (tar, rsync, restic or borg restore), holding
// store.db (the index snapshot) and each generation's payload under the
// directory of its state (leasefs.BackupPath). store.Restore verifies every
// payload's size and SHA-256 against the index and leaves nothing behind
// when one differs.
func runRestore(fl *flag.FlagSet, args []string, stdout io.Writer) error {
	pos, err := parseFlags(fl, args)
	if err != nil {
		return err
	}
	backup, dir := pos[0], pos[1]
	open := func(g store.Generation, a store.Artifact) (*os.File, error) {
		rel, err := leasefs.BackupPath(g, a.Name)
		if err != nil {
			return nil, err
		}
		return os.Open(filepath.Join(backup, rel))
	}
	if err := store.Restore(dir, filepath.Join(backup, leasefs.IndexFileName), open); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored store %s from %s\n", dir, backup)
	return nil
}
