package store

import (
	"fmt"

	"templatefs/store/manifest"
)

// openCapture opens the capture in dir for publication and checks it
// against this host: manifest.OpenCapture with the host's UTC clock (so a
// capture more than manifest.MaxAheadOfHost in the host's future is
// refused), then, for a capture of this boot, the agreement of its
// wall-clock and monotonic anchors within the restore window
// (checkAnchorAgreement). The caller must Close the capture. Errors: the
// host's read error; ErrCapture wrapping the manifest package's error or
// the anchor refusal; the index's errors.
func (s *Store) openCapture(dir string) (*manifest.Capture, error) {
	facts, err := s.host.Facts()
	if err != nil {
		return nil, fmt.Errorf("read host facts: %w", err)
	}
	c, err := manifest.OpenCapture(dir, facts.UTC)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	if err := s.checkAnchorAgreement(anchorsOf(c.Manifest), facts); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	return c, nil
}
