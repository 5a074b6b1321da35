package store

import (
	"fmt"
	"os"
	"path"
)

// openPayloadFile opens artifact name of generation gen read-only,
// relative to the store's directory handle (s.root, held open from Open to
// Close) without following a symbolic link anywhere on the way
// (openBeneath), and refuses it with ErrUnsafePath unless it has exactly
// one hard link: through another name, perhaps outside the store, its
// bytes could change under the digest its record vouches for. The caller
// closes the file.
func (s *Store) openPayloadFile(gen GenerationID, name string) (*os.File, error) {
	rel := path.Join(PayloadDir, gen.String(), name)
	f, err := openBeneath(s.root, rel)
	if err != nil {
		return nil, err
	}
	n, err := linkCount(f)
	if err == nil && n != 1 {
		// A publication of an incoming directory may be removing the
		// incoming names of a generation it just committed: wait for it.
		s.incomingLinks.RLock()
		n, err = linkCount(f)
		s.incomingLinks.RUnlock()
	}
	if err == nil && n != 1 {
		err = fmt.Errorf("%s has %d hard links, want 1: another name can change it (find it with find -samefile): %w", f.Name(), n, ErrUnsafePath)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
