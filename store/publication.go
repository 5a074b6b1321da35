package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// reservePublicationID reserves the next publication ID in its own
// committed transaction (Publish step 2), so that an ID is never handed
// out twice even if the publication dies before its record commits; such
// an ID stays burned. The publication sequence of the generations bucket
// holds the last ID reserved.
func (s *Store) reservePublicationID() (GenerationID, error) {
	var id GenerationID
	err := s.update(faultPublishReserve, func(tx *bolt.Tx) error {
		n, err := tx.Bucket(bucketGenerations).NextSequence()
		id = GenerationID(n)
		return err
	})
	return id, err
}

// beginPublication marks publication id as in progress from the moment
// its ID is reserved, so Check does not take its staging or payload
// directory for a leftover; endPublication clears the mark once the
// record is committed or the publication has failed.
func (s *Store) beginPublication(id GenerationID) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if s.publishing == nil {
		s.publishing = map[GenerationID]bool{}
	}
	s.publishing[id] = true
}

func (s *Store) endPublication(id GenerationID) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	delete(s.publishing, id)
}

// removePublicationLeftovers removes what a crashed publication left: every entry of
// staging/, and every payload directory whose generation has no record
// and whose ID is at or below the publication sequence (its ID was
// reserved but the record never committed; IDs are not reused). It
// first checks every payload directory, and changes nothing if one of
// them is unexplained (unexplainedPayloads): then it returns
// ErrPayloadAhead naming them all. With keepPayloads it removes no
// payload directory, only staging/ entries.
func (s *Store) removePublicationLeftovers(keepPayloads bool) error {
	payload := filepath.Join(s.dir, PayloadDir)
	entries, err := os.ReadDir(payload)
	if err != nil {
		return err
	}
	var leftovers []string
	err = s.db.View(func(tx *bolt.Tx) error {
		gens := tx.Bucket(bucketGenerations)
		if bad := unexplainedPayloads(entries, gens.Sequence()); len(bad) > 0 {
			return payloadAhead(bad)
		}
		for _, e := range entries {
			if id, _ := ParseGenerationID(e.Name()); gens.Get(genKey(id)) == nil {
				leftovers = append(leftovers, e.Name())
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	staging := filepath.Join(s.dir, StagingDir)
	entries, err = os.ReadDir(staging)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s.log.Info("removing publication leftover", "path", filepath.Join(staging, e.Name()))
		if err := os.RemoveAll(filepath.Join(staging, e.Name())); err != nil {
			return err
		}
	}
	if len(entries) > 0 {
		if err := syncDir(staging); err != nil {
			return err
		}
	}
	if keepPayloads {
		for _, name := range leftovers {
			s.log.Warn("keeping payload without a generation record: a meta page of the index is invalid, so the commit of its record may be lost; templatefs fsck --repair removes it",
				"path", filepath.Join(payload, name))
		}
		return nil
	}
	for _, name := range leftovers {
		s.log.Info("removing orphaned payload", "path", filepath.Join(payload, name))
		if err := os.RemoveAll(filepath.Join(payload, name)); err != nil {
			return err
		}
	}
	if len(leftovers) > 0 {
		return syncDir(payload)
	}
	return nil
}

// unexplainedPayloads describes the payload/ entries that no state of
// this index can have made, each as "payload/NAME (why)": names that are
// no generation ID (Publish only makes GenerationID.String names), and
// IDs above seq, the publication sequence, which Publish advances in a
// committed transaction before it creates the directory. Either means the
// index is older than the payloads (rolled back, or swapped for another
// store's) or the directory was put there by hand.
func unexplainedPayloads(entries []os.DirEntry, seq uint64) []string {
	var bad []string
	for _, e := range entries {
		if why := unexplainedPayload(e.Name(), seq); why != "" {
			bad = append(bad, PayloadDir+"/"+e.Name()+" ("+why+")")
		}
	}
	return bad
}

// unexplainedPayload says why payload/name cannot be a leftover of an
// index whose publication sequence is seq, or returns "" if it can.
func unexplainedPayload(name string, seq uint64) string {
	id, err := ParseGenerationID(name)
	switch {
	case err != nil:
		return "not a generation ID"
	case uint64(id) > seq:
		return fmt.Sprintf("above the publication sequence %d", seq)
	}
	return ""
}

// payloadAhead is the ErrPayloadAhead error for the descriptions bad.
func payloadAhead(bad []string) error {
	return fmt.Errorf("%w: %s; the index is older than the payloads (rolled back or swapped) and nothing was deleted: "+
		"put back the index.db that belongs with them, or move them out of %s", ErrPayloadAhead, strings.Join(bad, ", "), PayloadDir)
}
