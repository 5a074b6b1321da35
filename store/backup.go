package store

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/store/manifest"
)

// IndexSize returns the size in bytes of the index as a snapshot taken now
// would be (bolt.Tx.Size). A later commit can change it.
func (s *Store) IndexSize() (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	})
	return n, err
}

// SnapshotIndex writes a consistent copy of the index, taken in one read
// transaction (bolt.Tx.WriteTo), to an unlinked temporary file in staging/
// and returns it positioned at 0 with its size. The caller owns the file
// and must close it. A file left by a crash is removed by the next Open
// (staging/ is emptied). Errors: the temporary file's or the copy's.
func (s *Store) SnapshotIndex() (*os.File, int64, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, StagingDir), "index-snapshot-*")
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot index: %w", err)
	}
	// Unlinked at once where the OS allows it (not Windows: Open cleans up).
	os.Remove(f.Name())
	var n int64
	err = s.db.View(func(tx *bolt.Tx) error {
		n, err = tx.WriteTo(f)
		return err
	})
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("snapshot index into %s: %w", f.Name(), err)
	}
	return f, n, nil
}

// BackupSource opens the backed-up copy of one artifact of generation g
// for Restore. It returns an error wrapping fs.ErrNotExist when the backup
// lacks the file.
type BackupSource func(g Generation, a Artifact) (*os.File, error)

// Restore builds the store dir from a backup: index is a snapshot of an
// index (SnapshotIndex, as MNT/store.db), open gives each artifact's
// backed-up copy. The restored store gets a new random store ID and
// records the backup's as meta/restored_from (Info.RestoredFrom): it is a
// new store, whose leases and generations start as the backup's. Every artifact of every generation is copied sparsely
// into payload/<gen>/ and its size and SHA-256 checked against the
// generation record; every file and directory is fsynced. The store is
// built in a sibling directory and renamed to dir only when complete, so a
// failure leaves nothing behind. dir must be missing or an empty
// directory, below directories that pass Init's checks. Errors:
// ErrUnsafePath (as Init's), ErrExists (dir holds something), ErrBackupMismatch,
// the schema errors of Open for an index of another schema, or I/O errors,
// each naming the path.
func Restore(dir, index string, open BackupSource) (err error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		_, err = checkParents(abs, os.Geteuid())
	}
	if err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("restore into %s: directory holds %q: %w", dir, entries[0].Name(), ErrExists)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".restore-*")
	if err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	for _, sub := range []string{PayloadDir, StagingDir} {
		if err := os.Mkdir(filepath.Join(tmp, sub), 0o700); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	if err := copyIndex(filepath.Join(tmp, IndexFile), index); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	gens, err := adoptIndex(filepath.Join(tmp, IndexFile))
	if err != nil {
		return fmt.Errorf("restore from %s: %w", index, err)
	}
	for _, g := range gens {
		if err := restorePayload(filepath.Join(tmp, PayloadDir, g.ID.String()), g, open); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	for _, d := range []string{filepath.Join(tmp, PayloadDir), filepath.Join(tmp, StagingDir), tmp} {
		if err := syncDirAt(faultRestoreFsyncDirs, d); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	os.Remove(dir) // an empty directory; rename cannot replace it everywhere
	err = fault(faultRestoreRename)
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		return fmt.Errorf("restore: rename %s to %s: %w", tmp, dir, err)
	}
	if err := syncDirAt(faultRestoreFsyncParent, parent); err != nil {
		// The rename may not survive a crash: take it back, so that a
		// failed restore leaves nothing behind.
		if rerr := os.Rename(dir, tmp); rerr != nil {
			return fmt.Errorf("restore: %w (and %s stays: %v)", err, dir, rerr)
		}
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// copyIndex copies the index snapshot at src to dst (mode 0600) and fsyncs it.
func copyIndex(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	err = fault(faultRestoreIndexWrite)
	if err == nil {
		_, err = io.Copy(out, in)
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := syncFile(faultRestoreIndexFsync, out); err != nil {
		return err
	}
	return out.Close()
}

// adoptIndex checks the restored index at path (a damaged snapshot,
// checkIndexFile or a panic or fault while reading it, is
// ErrIndexCorrupt), checks its schema, gives it a new store ID with the
// backup's recorded as meta/restored_from (one committed, fsynced
// transaction) and returns every generation record.
func adoptIndex(path string) ([]Generation, error) {
	if _, err := checkIndexFile(path); err != nil {
		return nil, fmt.Errorf("%w: %s: %v; restore from another backup", ErrIndexCorrupt, path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
	defer db.Close()
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("store ID: %w", err)
	}
	var gens []Generation
	err = guard(func() error {
		if err := migrateIndex(db, false, func(string, ...any) {}); err != nil {
			return err
		}
		return db.Update(func(tx *bolt.Tx) error {
			if err := checkSchema(tx); err != nil {
				return err
			}
			meta := tx.Bucket(bucketMeta)
			if err := meta.Put(keyRestoredFrom, bytes.Clone(meta.Get(keyStoreID))); err != nil {
				return err
			}
			if err := meta.Put(keyStoreID, id[:]); err != nil {
				return err
			}
			b := tx.Bucket(bucketGenerations)
			return b.ForEach(func(k, _ []byte) error {
				var g Generation
				if _, err := getJSON(b, k, &g); err != nil {
					return err
				}
				gens = append(gens, g)
				return nil
			})
		})
	})
	if _, ok := err.(damage); ok {
		return nil, fmt.Errorf("%w: %s: %v; restore from another backup", ErrIndexCorrupt, path, err)
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close index %s: %w", path, cerr)
	}
	return gens, err
}

// restorePayload copies every artifact of g into dir (created here) with
// copyArtifact and checks its size and digest. An artifact name that is
// not a capture file's (captureArtifacts), such as a path a hostile
// backup index could name to write outside dir, is ErrBackupMismatch
// before anything is created.
func restorePayload(dir string, g Generation, open BackupSource) error {
	for _, a := range g.Artifacts {
		if !slices.Contains(captureArtifacts, a.Name) {
			return fmt.Errorf("generation %s: the index names artifact %q, which is not one of a capture's files %q: %w", g.ID, a.Name, captureArtifacts, ErrBackupMismatch)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, a := range g.Artifacts {
		src, err := open(g, a)
		if err != nil {
			return fmt.Errorf("generation %s %s: %w (%w)", g.ID, a.Name, ErrBackupMismatch, err)
		}
		digest, err := restoreArtifact(filepath.Join(dir, a.Name), src, a)
		src.Close()
		if err != nil {
			return fmt.Errorf("generation %s %s: %w", g.ID, a.Name, err)
		}
		if digest != a.SHA256 {
			return fmt.Errorf("generation %s %s: sha256 %s, index holds %s: %w", g.ID, a.Name, digest, a.SHA256, ErrBackupMismatch)
		}
	}
	return syncDirAt(faultRestorePayloadDir, dir)
}

// captureArtifacts are the names a generation's artifacts can have: the
// files of a capture (manifest.Capture).
var captureArtifacts = []string{manifest.ManifestFileName, manifest.StateFileName, manifest.MemoryFileName, manifest.ScratchFileName}

func restoreArtifact(dst string, src *os.File, a Artifact) (string, error) {
	fi, err := src.Stat()
	if err != nil {
		return "", err
	}
	if fi.Size() != a.Size {
		return "", fmt.Errorf("%s is %d bytes, index holds %d: %w", src.Name(), fi.Size(), a.Size, ErrBackupMismatch)
	}
	return copyArtifact(dst, src, a.Size, nil)
}
