package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"templatefs/store/manifest"
)

// identicalGeneration returns a generation of keyID, not retiring, whose
// artifacts have the names, sizes and digests of c's, if there is one.
// Candidates must match c's names, sizes and manifest.bin digest; only if
// one does are c's other artifacts hashed, and checked unchanged since
// before.
func (s *Store) identicalGeneration(keyID string, c *manifest.Capture, manifestDigest string, before []fileStamp) (Generation, bool, error) {
	var candidates []Generation
	err := s.db.View(func(tx *bolt.Tx) error {
		return forEachLiveGeneration(tx, keyID, func(g Generation) {
			if sameShape(g, c, manifestDigest) {
				candidates = append(candidates, g)
			}
		})
	})
	if err != nil || len(candidates) == 0 {
		return Generation{}, false, err
	}
	digests := map[string]string{manifest.ManifestFileName: manifestDigest}
	for _, f := range c.Files[1:] {
		h := sha256.New()
		if err := copySparse(nil, f.File, f.Size, h); err != nil {
			return Generation{}, false, fmt.Errorf("%s: %w", f.Name, err)
		}
		digests[f.Name] = hex.EncodeToString(h.Sum(nil))
	}
	if err := checkUnchanged(c, before); err != nil {
		return Generation{}, false, err
	}
	for _, g := range candidates {
		same := true
		for _, a := range g.Artifacts {
			same = same && digests[a.Name] == a.SHA256
		}
		if same {
			return g, true, nil
		}
	}
	return Generation{}, false, nil
}

// forEachLiveGeneration calls fn with every generation of keyID that is
// not retiring (retiring generations are on their way out), in ID order.
func forEachLiveGeneration(tx *bolt.Tx, keyID string, fn func(Generation)) error {
	kg := tx.Bucket(bucketKeyGenerations).Bucket([]byte(keyID))
	if kg == nil {
		return nil
	}
	return kg.ForEach(func(k, _ []byte) error {
		g, err := getGeneration(tx, GenerationID(binary.BigEndian.Uint64(k)))
		if err != nil {
			return err
		}
		if g.State != Retiring {
			fn(g)
		}
		return nil
	})
}

// sameShape reports whether g has exactly c's artifact names and sizes,
// in order, and manifest.bin with digest manifestDigest.
func sameShape(g Generation, c *manifest.Capture, manifestDigest string) bool {
	if len(g.Artifacts) != len(c.Files) {
		return false
	}
	for i, a := range g.Artifacts {
		if a.Name != c.Files[i].Name || a.Size != c.Files[i].Size {
			return false
		}
	}
	return g.Artifacts[0].Name == manifest.ManifestFileName && g.Artifacts[0].SHA256 == manifestDigest
}
