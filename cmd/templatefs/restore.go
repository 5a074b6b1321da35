package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
	index := filepath.Join(backup, leasefs.IndexFileName)
	if _, err := os.Stat(index); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s has no %s: BACKUP_DIR is the backup's copy of the mount's top directory (the one holding store.db and generations/)", backup, leasefs.IndexFileName)
	}
	if err := store.Restore(dir, index, open); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored store %s from %s\n", dir, backup)
	return nil
}
