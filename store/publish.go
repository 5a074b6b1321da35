package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/internal/sparsefile"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// Publish turns the capture in captureDir into a new generation under the
// compatibility key derived from class and the capture's manifest, also
// when a generation of that key already holds identical artifacts (see
// PublishIfNew). The procedure follows openvmm-snapshot-format.md §6,
// with the bbolt commit as the last step:
//
//  1. open and validate the capture against this host (openCapture):
//     bounded manifest, exact entry set, sizes equal to the manifest's,
//     calendar times not ahead of the host's clock, anchors that agree;
//     record each artifact's size, mtime and ctime (stampOf);
//  2. reserve the publication ID in its own committed transaction, so an ID
//     is never handed out twice even if this call dies;
//  3. copy every artifact into staging/<gen>/, writing only data extents
//     (holes stay holes on Linux; Windows copies are dense, §1) while
//     computing SHA-256; fsync each file (FlushFileBuffers on Windows)
//     and the directory;
//  4. refuse with ErrCaptureChanged if any artifact's size, mtime or
//     ctime now differs from step 1, or the copied manifest.bin from the
//     bytes validated in step 1: a writer was at work and the copy may be
//     torn;
//  5. rename staging/<gen> to payload/<gen> without replacing (Linux
//     RENAME_NOREPLACE, Windows MoveFileEx with MOVEFILE_WRITE_THROUGH)
//     and fsync both parents (syncDir);
//  6. commit the generation record, its key and index rows in one
//     transaction.
//
// A failure after step 2 removes staging/<gen> and leaves the ID burned; a
// crash before step 6 leaves no record and Open removes the leftovers. It
// returns ErrCapture (wrapping the manifest package's sentinel) for a
// refused capture, ErrCaptureChanged, and the templatekey error for a
// refused class.
//
// A failed fsync or commit makes the store read-only (durable.go): what
// the disk holds is unknown until a restart reads it again.
func (s *Store) Publish(captureDir string, class *templatekey.Class) (Generation, error) {
	g, _, err := s.publish(captureDir, class, PublishOptions{Duplicate: true})
	return g, s.readOnlyAfterSync(err)
}

// PublishIfNew is Publish, except for a capture identical to a generation
// already in the store: same key, and the same artifact names, sizes and
// SHA-256 digests. Then it copies nothing, reserves no ID, and returns that
// generation with published false. Retiring generations do not count:
// they are on their way out. A generation whose manifest.bin digest
// differs is ruled out from the manifest bytes already read, so only a
// real candidate makes the capture's other artifacts be read a second time
// (to hash them, before any copy). Errors are Publish's; a capture that
// changes while it is hashed is refused with ErrCaptureChanged.
func (s *Store) PublishIfNew(captureDir string, class *templatekey.Class) (g Generation, published bool, err error) {
	g, published, err = s.publish(captureDir, class, PublishOptions{})
	return g, published, s.readOnlyAfterSync(err)
}

// PublishOptions tunes PublishWith.
type PublishOptions struct {
	// Duplicate publishes a capture identical to a generation already in
	// the store as a new generation (Publish) instead of returning that
	// one (PublishIfNew).
	Duplicate bool
	// Progress, if not nil, is told the bytes copied of the capture's total.
	Progress Progress
	// link (PublishIncoming: the capture is on the store's disk) makes
	// step 3 hash and fsync each artifact where it is (hashArtifact), and
	// after step 4 hard-link them into staging/<gen>/ (linkArtifacts)
	// instead of copying them.
	link bool
	// expect, if not nil, is the key ID and artifacts the capture must
	// have (a pulled generation): any difference refuses it with
	// ErrExpectedDiffers, the key before an ID is reserved, each
	// artifact's digest after it is hashed, before any commit.
	expect *Expected
}

// PublishWith is Publish when opts.Duplicate, PublishIfNew otherwise,
// reporting the copy's progress to opts.Progress.
func (s *Store) PublishWith(captureDir string, class *templatekey.Class, opts PublishOptions) (g Generation, published bool, err error) {
	g, published, err = s.publish(captureDir, class, opts)
	return g, published, s.readOnlyAfterSync(err)
}

// publish is PublishWith, but for the read-only policy on a failed fsync.
func (s *Store) publish(captureDir string, class *templatekey.Class, opts PublishOptions) (Generation, bool, error) {
	start := time.Now()
	c, err := s.openCapture(captureDir)
	if err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
	}
	defer c.Close()
	key, err := templatekey.New(class, c.Manifest)
	if err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
	}
	keyID := key.ID()
	if err := opts.expect.checkKey(keyID, c); err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
	}
	before, err := captureStamps(c)
	if err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
	}
	sum := sha256.Sum256(c.ManifestBytes)
	manifestDigest := hex.EncodeToString(sum[:])
	if !opts.Duplicate {
		g, found, err := s.identicalGeneration(keyID, c, manifestDigest, before)
		if err != nil {
			return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
		}
		if found {
			s.log.Info("capture already published", "generation", g.ID.String(), "key", keyID, "capture", captureDir)
			return g, false, nil
		}
	}

	id, err := s.reservePublicationID()
	if err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: reserve publication ID: %w", captureDir, err)
	}
	s.beginPublication(id)
	defer s.endPublication(id)
	failpoint("publish-reserved")

	g := Generation{
		ID:              id,
		KeyID:           keyID,
		State:           Published,
		ManifestVersion: c.Manifest.Version,
		CaptureTime:     captureTime(c.Manifest),
		Anchors:         anchorsOf(c.Manifest),
	}
	staging := filepath.Join(s.dir, StagingDir, id.String())
	if err := os.Mkdir(staging, 0o700); err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(staging)
		}
	}()
	var total int64
	for _, f := range c.Files {
		total += f.Size
	}
	progress := s.newProgress(opts.Progress, total)
	for _, f := range c.Files {
		var digest string
		if opts.link {
			digest, err = hashArtifact(f, progress)
		} else {
			digest, err = copyArtifact(filepath.Join(staging, f.Name), f.File, f.Size, progress)
		}
		if err != nil {
			return Generation{}, false, fmt.Errorf("publish %s: %s: %w", captureDir, f.Name, err)
		}
		if f.Name == manifest.ManifestFileName && digest != manifestDigest {
			return Generation{}, false, fmt.Errorf("publish %s: %w: %s: the copy differs from the bytes validated; publish it again once nothing writes to it", captureDir, ErrCaptureChanged, f.Name)
		}
		g.Artifacts = append(g.Artifacts, Artifact{Name: f.Name, Size: f.Size, SHA256: digest})
		if err := opts.expect.checkArtifact(len(g.Artifacts)-1, g.Artifacts[len(g.Artifacts)-1]); err != nil {
			return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
		}
		failpoint("publish-copied-" + f.Name)
		if afterCopyHook != nil {
			afterCopyHook(f.Name)
		}
	}
	if err := checkUnchanged(c, before); err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
	}
	if opts.link {
		if err := linkArtifacts(staging, c); err != nil {
			return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
		}
	}
	if err := syncDirAt(faultPublishFsyncStage, staging); err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
	}
	final := filepath.Join(s.dir, PayloadDir, id.String())
	err = fault(faultPublishRename)
	if err == nil {
		err = renameNoReplace(staging, final)
	}
	if err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: rename %s to %s: %w", captureDir, staging, final, err)
	}
	committed = true // staging is gone; a failure below leaves an orphan that Open removes
	for _, d := range []string{filepath.Join(s.dir, StagingDir), filepath.Join(s.dir, PayloadDir)} {
		if err := syncDirAt(faultPublishFsyncParent, d); err != nil {
			return Generation{}, false, fmt.Errorf("publish %s: %w", captureDir, err)
		}
	}
	failpoint("publish-renamed")

	g.PublishedAt = s.now().UTC()
	err = s.update(faultPublishCommit, func(tx *bolt.Tx) error {
		keys := tx.Bucket(bucketKeys)
		if keys.Get([]byte(keyID)) == nil {
			seq, err := keys.NextSequence()
			if err != nil {
				return err
			}
			rec := KeyRecord{ID: keyID, Seq: seq, Canonical: key.Text(), CreatedAt: g.PublishedAt}
			if err := putJSON(keys, []byte(keyID), rec); err != nil {
				return err
			}
		}
		kg, err := tx.Bucket(bucketKeyGenerations).CreateBucketIfNotExists([]byte(keyID))
		if err != nil {
			return err
		}
		if err := kg.Put(genKey(id), nil); err != nil {
			return err
		}
		quarantineByFleet(tx, &g)
		s.countGeneration(tx, "", g.State)
		return putJSON(tx.Bucket(bucketGenerations), genKey(id), g)
	})
	if err != nil {
		return Generation{}, false, fmt.Errorf("publish %s: commit generation %s: %w", captureDir, id, err)
	}
	s.log.Info("published generation", "generation", id.String(), "key", keyID, "capture", captureDir)
	s.emit(Event{Kind: EventPublished, Generation: id, KeyID: keyID})
	if g.State == Tombstoned {
		s.log.Warn("published generation is tombstoned: the fleet quarantines its template", "generation", id.String(), "fleet_id", g.FleetID())
		s.emit(Event{Kind: EventTombstoned, Generation: id, KeyID: keyID})
	}
	s.observer().Published(artifactBytes(g), time.Since(start))
	return g, true, nil
}

// captureTime is the capture's own clock: the v6 time contract's UTC
// anchor, else the v5 capture wall clock, else created_at.
func captureTime(m *manifest.Manifest) time.Time {
	if c := m.Contract; c != nil {
		if c.Time != nil {
			return time.Unix(0, int64(c.Time.CaptureUTCNs)).UTC()
		}
		if ts := c.CaptureWallClock; ts.Seconds != 0 || ts.Nanos != 0 {
			return time.Unix(ts.Seconds, int64(ts.Nanos)).UTC()
		}
	}
	return time.Unix(m.CreatedAt.Seconds, int64(m.CreatedAt.Nanos)).UTC()
}

// copyArtifact creates dst (exclusively, mode 0400) as a copy of the first
// size bytes of src, fsyncs it and returns the lowercase hex SHA-256 of
// those bytes. Only data extents (sparsefile.NextExtent) are read, and of those only
// blocks that are not all zero are written, so on Linux a sparse source
// (or a dense one full of zeros) costs disk in proportion to its data. The
// digest covers every byte, holes read as zeros, on every OS. O_EXCL
// already refuses a symbolic link at dst, so no O_NOFOLLOW is needed. A
// failed fsync is a *syncError (durable.go). Every byte read or hashed
// as a hole is counted in progress (which may be nil).
func copyArtifact(dst string, src *os.File, size int64, progress *progressCounter) (string, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return "", err
	}
	defer out.Close()
	h := sha256.New()
	if err := fault(faultPayloadWrite); err != nil {
		return "", &os.PathError{Op: "write", Path: dst, Err: err}
	}
	if err := copySparse(out, src, size, countingHash{h, progress}); err != nil {
		return "", err
	}
	if fi, err := src.Stat(); err != nil || fi.Size() != size {
		return "", fmt.Errorf("source changed size during copy (want %d bytes): %v", size, err)
	}
	if err := syncFile(faultPayloadFsync, out); err != nil {
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

const copyBlock = 1 << 20

var zeroBlock = make([]byte, copyBlock)

// copySparse copies the first size bytes of src to out by data extent,
// writing only blocks that are not all zero, and feeds every byte to h. A
// nil out only hashes.
func copySparse(out, src *os.File, size int64, h hash.Hash) error {
	if out != nil {
		if err := out.Truncate(size); err != nil {
			return err
		}
	}
	buf := make([]byte, copyBlock)
	for off := int64(0); off < size; {
		data, hole := sparsefile.NextExtent(src, off, size)
		if err := hashZeros(h, data-off); err != nil {
			return err
		}
		for p := data; p < hole; {
			n := int(min(int64(len(buf)), hole-p))
			if _, err := src.ReadAt(buf[:n], p); err != nil {
				if errors.Is(err, io.EOF) {
					return fmt.Errorf("source is shorter than %d bytes", size)
				}
				return err
			}
			if _, err := h.Write(buf[:n]); err != nil { // a countingHash fails once interrupted
				return err
			}
			if out != nil && !bytes.Equal(buf[:n], zeroBlock[:n]) {
				if _, err := out.WriteAt(buf[:n], p); err != nil {
					return err
				}
			}
			p += int64(n)
		}
		off = hole
	}
	return nil
}

func hashZeros(h hash.Hash, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeroBlock)))
		if _, err := h.Write(zeroBlock[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// afterCopyHook, when set, runs after each artifact is copied, where the
// fail point publish-copied-<artifact> is. Only this package's tests set
// it, to change a capture at a known moment of its copy.
var afterCopyHook func(artifact string)
