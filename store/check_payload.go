package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// damagedPayload ends the detail of a problem with a generation's payload
// (missing, a wrong size or digest), which fsck cannot repair: it says what
// the operator does instead.
const damagedPayload = "; tombstone and retire the generation, then publish its capture again or restore the store from a backup"

// abandoned reports whether the entry name of payload/ or staging/ (sub)
// belongs to no publication: its name is no generation ID, or no
// publication of that ID is in progress and, for payload/, no record of
// it exists now, for staging/, the entry still exists (a publication
// that finished since the listing renamed it away). The in-progress mark
// is read first, and Publish clears it only after committing (after
// renaming staging/<gen> away, or removing it), so a publication finishing
// meanwhile is seen; IDs are never reused, so no new one can start.
func (s *Store) abandoned(sub, name string) (bool, error) {
	id, err := ParseGenerationID(name)
	if err != nil {
		return true, nil
	}
	s.pubMu.Lock()
	busy := s.publishing[id]
	s.pubMu.Unlock()
	if busy {
		return false, nil
	}
	if sub == StagingDir {
		_, err := os.Lstat(filepath.Join(s.dir, StagingDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return true, err
	}
	var known bool
	err = s.db.View(func(tx *bolt.Tx) error {
		known = tx.Bucket(bucketGenerations).Get(genKey(id)) != nil
		return nil
	})
	return !known, err
}

// digestJob is one artifact whose SHA-256 Check recomputes.
type digestJob struct {
	gen  GenerationID
	want Artifact
}

// checkPayloads compares payload/ and staging/ with the generations read
// by Check and returns the artifacts that passed the size check.
func (s *Store) checkPayloads(c *checker, gens []Generation) ([]digestJob, error) {
	payload := filepath.Join(s.dir, PayloadDir)
	entries, err := os.ReadDir(payload)
	if err != nil {
		return nil, err
	}
	unclaimed := map[string]bool{}
	for _, e := range entries {
		unclaimed[e.Name()] = true
	}
	var jobs []digestJob
	for _, g := range gens {
		delete(unclaimed, g.ID.String())
		if jobs, err = c.artifacts(s, g, jobs); err != nil {
			return nil, err
		}
	}
	// Read after the listing: a publication's ID is reserved before its
	// payload directory exists, so a listed directory of a publication in
	// progress is at or below this sequence.
	var seq uint64
	if err := s.db.View(func(tx *bolt.Tx) error { seq = tx.Bucket(bucketGenerations).Sequence(); return nil }); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !unclaimed[e.Name()] {
			continue
		}
		if gone, err := s.abandoned(PayloadDir, e.Name()); err != nil || !gone {
			if err != nil {
				return nil, err
			}
			continue // a publication in progress, or committed meanwhile
		}
		if why := unexplainedPayload(e.Name(), seq); why != "" {
			c.add(ProblemPayloadAhead, PayloadDir+"/"+e.Name(), "%s: the index is older than this payload (rolled back or swapped), or it was put there by hand; not removed", why)
			continue
		}
		if err := s.checkLeftover(c, e.Name(), true, PayloadDir, ProblemPayloadOrphaned, "no generation record"); err != nil {
			return nil, err
		}
	}
	staging, err := os.ReadDir(filepath.Join(s.dir, StagingDir))
	if err != nil {
		return nil, err
	}
	for _, e := range staging {
		if err := s.checkLeftover(c, e.Name(), true, StagingDir, ProblemStagingLeftover, "no publication in progress owns it"); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// checkDigests hashes each job's file, counting the bytes hashed in
// progress (which may be nil). A file that vanished because its
// generation was retired meanwhile is skipped.
func (s *Store) checkDigests(c *checker, jobs []digestJob, progress Progress) error {
	var total int64
	for _, j := range jobs {
		total += j.want.Size
	}
	counter := s.newProgress(progress, total)
	for _, j := range jobs {
		before := counter.done
		sum, err := s.payloadSHA256(j.gen, j.want.Name, counter)
		if errors.Is(err, ErrInterrupted) {
			return err
		}
		counter.add(before + j.want.Size - counter.done) // a short or missing file still counts as done
		if errors.Is(err, os.ErrNotExist) {
			if _, gerr := s.Generation(j.gen); errors.Is(gerr, ErrNotFound) {
				continue
			}
			c.add(ProblemArtifactMissing, "generation "+j.gen.String(), "%s: no such file"+damagedPayload, j.want.Name)
			continue
		}
		if errors.Is(err, ErrUnsafePath) { // linked since artifacts looked
			c.add(ProblemArtifactLinks, "generation "+j.gen.String(), "%v", err)
			continue
		}
		if err != nil {
			return err
		}
		if sum != j.want.SHA256 {
			c.add(ProblemArtifactDigest, "generation "+j.gen.String(), "%s has SHA-256 %s, the record says %s"+damagedPayload, j.want.Name, sum, j.want.SHA256)
		}
	}
	return nil
}

// checkLeftover reports sub/name as kind if it is a candidate and
// abandoned; the fix checks again, then removes it and fsyncs sub/.
func (s *Store) checkLeftover(c *checker, name string, candidate bool, sub, kind, detail string) error {
	if !candidate {
		return nil
	}
	gone, err := s.abandoned(sub, name)
	if err != nil || !gone {
		return err
	}
	i := c.add(kind, sub+"/"+name, "%s", detail)
	c.fixFiles[i] = func() error {
		if gone, err := s.abandoned(sub, name); err != nil || !gone {
			return err
		}
		if err := removeAt(faultRepairRemove, filepath.Join(s.dir, sub, name)); err != nil {
			return err
		}
		return syncDirAt(faultRepairFsync, filepath.Join(s.dir, sub))
	}
	return nil
}

// artifacts checks that payload/<gen>/ of store s holds exactly g's
// artifacts, as regular files of the recorded sizes with one hard link
// each, and appends those that passed to jobs.
func (c *checker) artifacts(s *Store, g Generation, jobs []digestJob) ([]digestJob, error) {
	subject := "generation " + g.ID.String()
	rel := PayloadDir + "/" + g.ID.String()
	dir := filepath.Join(s.dir, rel)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.add(ProblemPayloadMissing, subject, "no directory %s"+damagedPayload, rel)
		return jobs, nil
	case err != nil:
		return nil, err
	case !fi.IsDir():
		c.add(ProblemPayloadMissing, subject, "%s is a %v, not a directory"+damagedPayload, rel, fi.Mode().Type())
		return jobs, nil
	}
	listed := map[string]bool{}
	for _, a := range g.Artifacts {
		listed[a.Name] = true
		p := filepath.Join(dir, a.Name)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			c.add(ProblemArtifactMissing, subject, "%s: no such file"+damagedPayload, a.Name)
			continue
		case err != nil:
			return nil, err
		case !fi.Mode().IsRegular():
			c.add(ProblemArtifactMissing, subject, "%s is a %v, not a regular file"+damagedPayload, a.Name, fi.Mode().Type())
			continue
		case fi.Size() != a.Size:
			c.add(ProblemArtifactSize, subject, "%s is %d bytes, the record says %d"+damagedPayload, a.Name, fi.Size(), a.Size)
			continue
		}
		f, err := s.openPayloadFile(g.ID, a.Name)
		switch {
		case errors.Is(err, ErrUnsafePath): // hard links (a symlink swapped in since Lstat: the detail says so)
			if other, fix := s.incomingLink(p); fix != nil {
				i := c.add(ProblemArtifactLinks, subject, "%v: the other is %s, left by a publication of that incoming directory interrupted after its commit; repair removes it", err, other)
				c.fixFiles[i] = fix
				continue
			}
			c.add(ProblemArtifactLinks, subject, "%v", err)
			continue
		case err != nil:
			return nil, err
		}
		f.Close()
		jobs = append(jobs, digestJob{gen: g.ID, want: a})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if listed[e.Name()] {
			continue
		}
		p := filepath.Join(dir, e.Name())
		i := c.add(ProblemArtifactUnexpected, subject, "%s is not one of its artifacts", e.Name())
		c.fixFiles[i] = func() error {
			if err := removeAt(faultRepairRemove, p); err != nil {
				return err
			}
			if err := syncDirAt(faultRepairFsync, dir); !errors.Is(err, os.ErrNotExist) {
				return err // a generation retired meanwhile took the directory
			}
			return nil
		}
	}
	return jobs, nil
}

// payloadSHA256 returns the lowercase hex SHA-256 of artifact name of
// generation gen, opened as OpenPayload opens it (openPayloadFile),
// counting the bytes read in progress (which may be nil).
func (s *Store) payloadSHA256(gen GenerationID, name string, progress *progressCounter) (string, error) {
	f, err := s.openPayloadFile(gen, name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(countingHash{h, progress}, f, make([]byte, copyBlock)); err != nil {
		return "", fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
