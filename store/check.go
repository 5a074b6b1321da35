package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// CheckOptions selects what Check does beyond its index and directory
// checks.
type CheckOptions struct {
	// Digests also recomputes every artifact's SHA-256, reading every
	// payload byte (holes read as zeros), and compares it with the record.
	Digests bool
	// Repair fixes what can be fixed without guessing: index rows that
	// disagree with their records, pending retirements, orphaned payload
	// directories, staging leftovers and unexpected payload files. Other
	// problems are reported only.
	Repair bool
	// Progress, if not nil, is told the bytes hashed of the total to hash
	// (with Digests).
	Progress Progress
}

// Kinds of Problem.
const (
	ProblemIndex              = "index"                    // bbolt page-level inconsistency (bbolt Tx.Check) or an undecodable or misfiled record
	ProblemLeaseGeneration    = "lease-without-generation" // a lease names a generation that does not exist (retired or never published); an exited lease may outlive its retired generation
	ProblemLeaseIndexMissing  = "lease-index-missing"      // a lease is not listed in generation_leases under its generation, or a tracked lease not in tracked_leases
	ProblemLeaseIndexStale    = "lease-index-stale"        // a generation_leases row or bucket with no matching lease, or a tracked_leases row of a lease not tracked
	ProblemKeyMissing         = "key-missing"              // a generation or key_generations bucket names a key with no key record
	ProblemKeyIndexMissing    = "key-index-missing"        // a generation is not listed in key_generations under its key
	ProblemKeyIndexStale      = "key-index-stale"          // a key_generations row for a missing generation or one of another key
	ProblemPayloadMissing     = "payload-missing"          // a generation has no payload directory
	ProblemArtifactMissing    = "artifact-missing"         // a recorded artifact is not a regular file in the payload directory
	ProblemArtifactSize       = "artifact-size"            // an artifact's size differs from the record
	ProblemArtifactLinks      = "artifact-links"           // an artifact has more than one hard link: another name can change it
	ProblemArtifactDigest     = "artifact-digest"          // an artifact's SHA-256 differs from the record (CheckOptions.Digests)
	ProblemArtifactUnexpected = "artifact-unexpected"      // a payload directory holds an entry the record does not list
	ProblemPayloadOrphaned    = "payload-orphaned"         // a payload directory without a generation record, at or below the publication sequence (a crashed publication's leftover)
	ProblemPayloadAhead       = "payload-ahead"            // a payload directory above the publication sequence or not named by a generation ID: the index is older than the payloads; never repaired (Open refuses such a store)
	ProblemIndexCorrupt       = "index-corrupt"            // the index file is damaged (ErrIndexCorrupt): reported by templatefs fsck when Open or Check fails so; never repaired
	ProblemStagingLeftover    = "staging-leftover"         // an entry in staging/ that no publication in progress owns
	ProblemRetirementPending  = "retirement-pending"       // a retiring generation with no leases left is not yet deleted (also seen while a release is finishing it)
)

// Problem is one violated store invariant.
type Problem struct {
	Kind     string // one of the Problem* constants
	Subject  string // what is wrong, for example "generation g000003", "lease \"c1\"", "payload/g000009"
	Detail   string // why, with the numbers that disagree
	Repaired bool   // Check with Repair fixed it
	// Repairable says that Check with Repair fixes problems of this kind
	// and subject: set on every such problem, repaired or not (a
	// read-only store repairs nothing).
	Repairable bool
}

// String renders the problem as one line: "kind subject: detail", with
// " (repaired)" appended when Repaired.
func (p Problem) String() string {
	s := p.Kind + " " + p.Subject + ": " + p.Detail
	if p.Repaired {
		s += " (repaired)"
	}
	return s
}

// checker collects problems and, for those Repair may fix, the fix.
type checker struct {
	problems []Problem
	fixIndex map[int]func(tx *bolt.Tx) error // by problem index; each re-checks before writing
	fixFiles map[int]func() error
}

func (c *checker) add(kind, subject, format string, args ...any) int {
	c.problems = append(c.problems, Problem{Kind: kind, Subject: subject, Detail: fmt.Sprintf(format, args...)})
	return len(c.problems) - 1
}

// Check verifies the store's invariants and returns every problem found,
// each on its own line (Problem.String), in a stable order; a clean store
// gives none. The index is read in one transaction (bbolt's page check
// included) and compared with the
// payload and staging directories while retirements wait; digests are
// then computed without holding anything, so releases and retirements
// proceed meanwhile. Publications in progress are not reported. Check
// changes nothing unless opts.Repair, and then only what
// CheckOptions.Repair lists, marking those problems Repaired; a read-only
// store (Store.ReadOnly) repairs nothing and returns its error with the
// problems. It returns an error only when it cannot look (an unreadable
// directory, ErrIndexCorrupt) or repair (a failed repair transaction).
func (s *Store) Check(opts CheckOptions) ([]Problem, error) {
	c := &checker{fixIndex: map[int]func(*bolt.Tx) error{}, fixFiles: map[int]func() error{}}
	jobs, err := s.inspect(c)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	if opts.Digests {
		if err := s.checkDigests(c, jobs, opts.Progress); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
	}
	for i := range c.problems {
		_, index := c.fixIndex[i]
		_, files := c.fixFiles[i]
		c.problems[i].Repairable = index || files
	}
	if opts.Repair {
		if err := s.ReadOnly(); err != nil {
			return c.problems, fmt.Errorf("check: repair: %w", err)
		}
		s.maint.Lock()
		defer s.maint.Unlock()
		if err := s.repair(c); err != nil {
			return c.problems, fmt.Errorf("check: repair: %w", err)
		}
	}
	return c.problems, nil
}

// inspect runs every check but the digests, holding s.maint so that no
// generation is deleted meanwhile, and returns the artifacts to digest.
func (s *Store) inspect(c *checker) ([]digestJob, error) {
	s.maint.Lock()
	defer s.maint.Unlock()
	var gens []Generation
	// bbolt's Tx.Check is only safe alongside other writers on a writable
	// transaction; this one writes nothing and is rolled back.
	err := s.db.rolledBack(func(tx *bolt.Tx) error {
		var pageErrs []error
		for err := range tx.Check() {
			pageErrs = append(pageErrs, err)
		}
		if s.db.otherMeta != nil {
			unchecked := ""
			// bbolt's check first asserts both meta pages' ids, so a
			// damaged one stops it with a panic that says nothing more.
			if len(pageErrs) == 1 && strings.HasPrefix(pageErrs[0].Error(), "panic: ") {
				unchecked, pageErrs = "; until then bbolt's page check cannot run", nil
			}
			c.add(ProblemIndex, IndexFile, "%v; bbolt uses the other meta page, so the last commit may be lost, and the next change to the store (a lease, a publication, a settings change) rewrites this one%s", s.db.otherMeta, unchecked)
		}
		for _, err := range pageErrs {
			c.add(ProblemIndex, IndexFile, "%v", err)
		}
		var err error
		if gens, err = c.generations(tx); err != nil {
			return err
		}
		c.leases(tx, gens)
		c.keys(tx, gens)
		for _, g := range gens {
			if g.State == Retiring && !hasLeases(tx, g.ID) {
				id := g.ID
				i := c.add(ProblemRetirementPending, "generation "+id.String(), "retiring with no leases left, not yet deleted")
				c.fixFiles[i] = func() error { return s.finishRetirement(id) }
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.checkPayloads(c, gens)
}

// repair runs the index fixes in one transaction, then the file fixes.
func (s *Store) repair(c *checker) error {
	if len(c.fixIndex) > 0 {
		err := s.update(faultRepairCommit, func(tx *bolt.Tx) error {
			for i := range c.problems {
				if fix, ok := c.fixIndex[i]; ok {
					if err := fix(tx); err != nil {
						return fmt.Errorf("%s: %w", c.problems[i], err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		failpoint("repair-index-committed")
		for i := range c.fixIndex {
			c.problems[i].Repaired = true
			s.log.Info("repaired", "problem", c.problems[i].String())
		}
	}
	for i := range c.problems {
		if fix, ok := c.fixFiles[i]; ok {
			if err := s.readOnlyAfterSync(fix()); err != nil {
				return fmt.Errorf("%s: %w", c.problems[i], err)
			}
			c.problems[i].Repaired = true
			s.log.Info("repaired", "problem", c.problems[i].String())
		}
	}
	return nil
}

// generations decodes every generation record, reporting records that do
// not decode or are filed under another ID.
func (c *checker) generations(tx *bolt.Tx) ([]Generation, error) {
	var gens []Generation
	b := tx.Bucket(bucketGenerations)
	err := b.ForEach(func(k, _ []byte) error {
		var g Generation
		if _, err := getJSON(b, k, &g); err != nil {
			c.add(ProblemIndex, fmt.Sprintf("generations/%x", k), "%v", err)
			return nil
		}
		if id, ok := genOf(k); !ok || id != g.ID {
			c.add(ProblemIndex, fmt.Sprintf("generations/%x", k), "row holds the record of generation %s", g.ID)
			return nil
		}
		gens = append(gens, g)
		return nil
	})
	return gens, err
}

// leases checks that leases and generation_leases agree both ways and
// that every lease names an existing generation.
func (c *checker) leases(tx *bolt.Tx, gens []Generation) {
	exists := map[GenerationID]bool{}
	for _, g := range gens {
		exists[g.ID] = true
	}
	leases := tx.Bucket(bucketLeases)
	gls := tx.Bucket(bucketGenerationLeases)
	leases.ForEach(func(k, _ []byte) error {
		l, _, err := getLease(leases, k)
		if err != nil {
			c.add(ProblemIndex, fmt.Sprintf("lease %q", k), "%v", err)
			return nil
		}
		k = bytes.Clone(k) // used by a fix after this transaction
		subject := fmt.Sprintf("lease %q", l.CloneID)
		if tracked(l) && tx.Bucket(bucketTrackedLeases).Get(k) == nil {
			i := c.add(ProblemLeaseIndexMissing, subject, "%s with a process but not listed in tracked_leases, so exit tracking would not watch it", l.State)
			c.fixIndex[i] = func(tx *bolt.Tx) error { return relistTracked(tx, k) }
		}
		if l.State == Exited && !exists[l.Generation] {
			return nil // outlived its retired generation, until released
		}
		if !exists[l.Generation] {
			c.add(ProblemLeaseGeneration, subject, "names generation %s, which does not exist; release the lease once its clone has exited", l.Generation)
		}
		if gl := gls.Bucket(genKey(l.Generation)); gl == nil || gl.Get(k) == nil {
			i := c.add(ProblemLeaseIndexMissing, subject, "not listed under generation_leases/%s", l.Generation)
			c.fixIndex[i] = func(tx *bolt.Tx) error {
				if now, found, err := getLease(tx.Bucket(bucketLeases), k); err != nil || !found || now.Generation != l.Generation {
					return err
				}
				gl, err := tx.Bucket(bucketGenerationLeases).CreateBucketIfNotExists(genKey(l.Generation))
				if err != nil {
					return err
				}
				return gl.Put(k, nil)
			}
		}
		return nil
	})
	tx.Bucket(bucketTrackedLeases).ForEach(func(clone, _ []byte) error {
		l, found, err := getLease(leases, clone)
		if err != nil || found && tracked(l) {
			return nil // an undecodable row is reported above
		}
		clone = bytes.Clone(clone)
		detail := "no such lease"
		if found {
			detail = fmt.Sprintf("the lease is %s, which exit tracking does not watch", l.State)
		}
		i := c.add(ProblemLeaseIndexStale, fmt.Sprintf("tracked_leases/%s", clone), "%s", detail)
		c.fixIndex[i] = func(tx *bolt.Tx) error { return relistTracked(tx, clone) }
		return nil
	})
	gls.ForEachBucket(func(gk []byte) error {
		gk = bytes.Clone(gk)
		gl := gls.Bucket(gk)
		gen, ok := genOf(gk)
		if !ok {
			c.add(ProblemIndex, fmt.Sprintf("generation_leases/%x", gk), "bucket name is not a generation ID")
			return nil
		}
		if k, _ := gl.Cursor().First(); k == nil && !exists[gen] {
			i := c.add(ProblemLeaseIndexStale, "generation "+gen.String(), "empty generation_leases bucket for a generation that does not exist")
			c.fixIndex[i] = func(tx *bolt.Tx) error {
				gls := tx.Bucket(bucketGenerationLeases)
				if gl := gls.Bucket(gk); gl != nil {
					if k, _ := gl.Cursor().First(); k == nil {
						return gls.DeleteBucket(gk)
					}
				}
				return nil
			}
		}
		return gl.ForEach(func(clone, _ []byte) error {
			clone = bytes.Clone(clone)
			l, found, err := getLease(leases, clone)
			if err == nil && found && l.Generation == gen {
				return nil
			}
			detail := "no such lease"
			if found {
				detail = "the lease is on generation " + l.Generation.String()
			}
			i := c.add(ProblemLeaseIndexStale, fmt.Sprintf("generation_leases/%s/%s", gen, clone), "%s", detail)
			c.fixIndex[i] = func(tx *bolt.Tx) error {
				now, found, err := getLease(tx.Bucket(bucketLeases), clone)
				if err != nil || found && now.Generation == gen {
					return err
				}
				if gl := tx.Bucket(bucketGenerationLeases).Bucket(gk); gl != nil {
					return gl.Delete(clone)
				}
				return nil
			}
			return nil
		})
	})
}

// relistTracked makes tracked_leases/ agree with the lease row of clone
// as it is now: listed if tracked, else not. Errors: a row that does not
// decode.
func relistTracked(tx *bolt.Tx, clone []byte) error {
	l, found, err := getLease(tx.Bucket(bucketLeases), clone)
	switch {
	case err != nil:
		return err
	case found && tracked(l):
		return tx.Bucket(bucketTrackedLeases).Put(clone, nil)
	}
	return tx.Bucket(bucketTrackedLeases).Delete(clone)
}

// keys checks that key_generations rows point to existing generations of
// that key, that every generation is listed under its key, and that every
// key named has a key record.
func (c *checker) keys(tx *bolt.Tx, gens []Generation) {
	byID := map[GenerationID]Generation{}
	keys := tx.Bucket(bucketKeys)
	kgs := tx.Bucket(bucketKeyGenerations)
	for _, g := range gens {
		byID[g.ID] = g
		if keys.Get([]byte(g.KeyID)) == nil {
			c.add(ProblemKeyMissing, "generation "+g.ID.String(), "key %s has no key record", g.KeyID)
		}
		if kg := kgs.Bucket([]byte(g.KeyID)); kg == nil || kg.Get(genKey(g.ID)) == nil {
			i := c.add(ProblemKeyIndexMissing, "generation "+g.ID.String(), "not listed under key_generations/%s", g.KeyID)
			c.fixIndex[i] = func(tx *bolt.Tx) error {
				if now, err := getGeneration(tx, g.ID); err != nil || now.KeyID != g.KeyID {
					return nil
				}
				kg, err := tx.Bucket(bucketKeyGenerations).CreateBucketIfNotExists([]byte(g.KeyID))
				if err != nil {
					return err
				}
				return kg.Put(genKey(g.ID), nil)
			}
		}
	}
	kgs.ForEachBucket(func(key []byte) error {
		key = bytes.Clone(key)
		if keys.Get(key) == nil {
			c.add(ProblemKeyMissing, "key "+string(key), "key_generations lists a key with no key record")
		}
		return kgs.Bucket(key).ForEach(func(k, _ []byte) error {
			k = bytes.Clone(k)
			gen, ok := genOf(k)
			if !ok {
				c.add(ProblemIndex, fmt.Sprintf("key_generations/%s/%x", key, k), "row key is not a generation ID")
				return nil
			}
			g, ok := byID[gen]
			if ok && g.KeyID == string(key) {
				return nil
			}
			detail := "no such generation"
			if ok {
				detail = "the generation is under key " + g.KeyID
			}
			i := c.add(ProblemKeyIndexStale, fmt.Sprintf("key_generations/%s/%s", key, gen), "%s", detail)
			c.fixIndex[i] = func(tx *bolt.Tx) error {
				if now, err := getGeneration(tx, gen); err == nil && now.KeyID == string(key) {
					return nil
				}
				if kg := tx.Bucket(bucketKeyGenerations).Bucket(key); kg != nil {
					return kg.Delete(k)
				}
				return nil
			}
			return nil
		})
	})
}

// genOf decodes a generation ID index key (8 bytes, big-endian, not 0).
func genOf(k []byte) (GenerationID, bool) {
	if len(k) != 8 || binary.BigEndian.Uint64(k) == 0 {
		return 0, false
	}
	return GenerationID(binary.BigEndian.Uint64(k)), true
}
