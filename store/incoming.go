package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// Incoming directories: publication by file I/O (the mount's
// incoming/<name>/, project issue 9 §4). Each lives on the store's own
// disk, so publishing one links its artifacts into the payload area
// instead of copying them again.
const (
	// IncomingDir holds the incoming directories: incoming/<name>/.
	// Unlike staging/ it is never emptied at Open: what it holds is a
	// user's capture in progress.
	IncomingDir = "incoming"
	// IncomingCaptureDir is the capture directory inside incoming/<name>/:
	// manifest.bin and the artifacts, published with manifest.OpenCapture
	// like any capture directory.
	IncomingCaptureDir = "capture"
	// IncomingClassFile is the capture class inside incoming/<name>/,
	// decoded with templatekey.DecodeClass.
	IncomingClassFile = "class.json"
)

// ErrNotEmpty is returned by RemoveIncoming for an incoming directory that
// still holds files.
var ErrNotEmpty = errors.New("directory not empty")

// IncomingPath returns the absolute path of incoming/<name>/, or
// ErrInvalidID if name is not a clone ID (the same grammar: 1 to 128 bytes
// of [A-Za-z0-9._-], not starting with . or -). It does not check that
// the directory exists.
func (s *Store) IncomingPath(name string) (string, error) {
	if err := ValidateCloneID(name); err != nil {
		return "", fmt.Errorf("incoming directory name: %w", err)
	}
	return filepath.Join(s.dir, IncomingDir, name), nil
}

// changeableIncoming is IncomingPath for a change of the directory: it
// also refuses while the store is read-only (ErrReadOnly).
func (s *Store) changeableIncoming(name string) (string, error) {
	dir, err := s.IncomingPath(name)
	if err != nil {
		return "", err
	}
	return dir, s.ReadOnly()
}

// MakeIncoming creates incoming/<name>/ and its capture/ directory, mode
// 0700, durably (both directories and their parents fsynced), creating
// incoming/ itself the first time. Errors: ErrInvalidID, ErrExists, the
// read-only store's ErrReadOnly, the system error.
func (s *Store) MakeIncoming(name string) error {
	dir, err := s.changeableIncoming(name)
	if err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	switch err := mkdirPrivate(parent); {
	case err == nil:
		if err := syncDir(s.dir); err != nil {
			return s.readOnlyAfterSync(&syncError{err})
		}
	case !errors.Is(err, os.ErrExist):
		return err
	}
	if err := mkdirPrivate(dir); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("incoming directory %s: %w", name, ErrExists)
		}
		return err
	}
	if err := mkdirPrivate(filepath.Join(dir, IncomingCaptureDir)); err != nil {
		return err
	}
	for _, d := range []string{dir, parent} {
		if err := syncDir(d); err != nil {
			return s.readOnlyAfterSync(&syncError{err})
		}
	}
	s.log.Info("made incoming directory", "incoming", name)
	return nil
}

// IncomingNames lists the incoming directories, sorted by name; none when
// incoming/ does not exist yet. Entries that are not valid names are left
// out (nothing makes them).
func (s *Store) IncomingNames() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, IncomingDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && ValidateCloneID(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// RemoveIncoming removes the empty incoming directory name (with its empty
// capture/ directory), durably. Errors: ErrInvalidID, ErrNotFound,
// ErrNotEmpty while it holds a file (a published incoming directory is
// empty: its artifacts moved into the generation and its class.json was
// consumed), ErrReadOnly, the system error.
func (s *Store) RemoveIncoming(name string) error {
	dir, err := s.changeableIncoming(name)
	if err != nil {
		return err
	}
	capture := filepath.Join(dir, IncomingCaptureDir)
	for _, d := range []string{capture, dir} {
		entries, err := os.ReadDir(d)
		switch {
		case errors.Is(err, os.ErrNotExist) && d == dir:
			return fmt.Errorf("incoming directory %s: %w", name, ErrNotFound)
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return err
		}
		for _, e := range entries {
			if d == dir && e.Name() == IncomingCaptureDir {
				continue
			}
			return fmt.Errorf("incoming directory %s holds %s: %w", name, e.Name(), ErrNotEmpty)
		}
	}
	if err := os.Remove(capture); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(dir); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return s.readOnlyAfterSync(&syncError{err})
	}
	s.log.Info("removed incoming directory", "incoming", name)
	return nil
}

// PublishIncoming publishes incoming/<name>/: capture/ as the capture and
// class.json as its class, by the procedure of Publish (publish.go), with
// one difference: the artifacts are on the store's disk already, so they
// are hashed and fsynced where they are and hard-linked into
// staging/<gen>/ rather than copied (a 4 GiB sparse memory.bin costs its
// hashing, not a second write). Once the generation is committed, the
// incoming names are removed (the payload's only name is then its own,
// as openPayloadFile requires) and class.json is consumed, so the
// directory is empty. A crash between the commit and that removal leaves
// names with two links, which Open removes (recoverIncoming).
//
// The caller must make sure nothing has an artifact open for writing (an
// open descriptor would reach the published inode): leasefs refuses the
// publication while one is. Errors: ErrInvalidID, ErrNotFound for a
// missing directory, ErrCapture (a missing, unreadable or refused
// class.json too, wrapping the templatekey error, and a file of capture/
// with more than one hard link, which publishing would share with the
// other name: both checked before a publication ID is reserved),
// ErrCaptureChanged, and Publish's errors. A refusal leaves the directory
// as it was.
func (s *Store) PublishIncoming(name string) (Generation, error) {
	return s.publishIncoming(name, nil, nil)
}

// publishIncoming is PublishIncoming; a non-nil expect is the generation
// the capture must become (a pull, pull.go), checked before anything is
// committed, and progress (may be nil) sees the hashing.
func (s *Store) publishIncoming(name string, expect *Expected, progress Progress) (Generation, error) {
	dir, err := s.IncomingPath(name)
	if err != nil {
		return Generation{}, err
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return Generation{}, fmt.Errorf("incoming directory %s: %w", name, ErrNotFound)
	}
	class, err := readIncomingClass(filepath.Join(dir, IncomingClassFile))
	if err != nil {
		return Generation{}, fmt.Errorf("publish incoming %s: %w", name, err)
	}
	if err := checkSingleLinks(filepath.Join(dir, IncomingCaptureDir)); err != nil {
		return Generation{}, fmt.Errorf("publish incoming %s: %w", name, err)
	}
	s.incomingLinks.Lock() // until the incoming names are gone: see openPayloadFile
	defer s.incomingLinks.Unlock()
	g, _, err := s.publish(filepath.Join(dir, IncomingCaptureDir), class, PublishOptions{Duplicate: true, link: true, expect: expect, Progress: progress})
	if classRefused(err) {
		err = fmt.Errorf("%w: %s: %w", ErrCapture, IncomingClassFile, err)
	}
	if err != nil {
		return Generation{}, s.readOnlyAfterSync(err)
	}
	failpoint("incoming-committed")
	if err := s.unlinkIncoming(dir, g); err != nil {
		// The generation is durable; the names left are removed at Open.
		s.log.Error("published incoming directory, but could not remove its names", "incoming", name, "generation", g.ID.String(), "err", err.Error())
	}
	return g, nil
}

// readIncomingClass decodes the class file at path. A missing,
// unreadable or invalid file is ErrCapture (wrapping the templatekey
// error).
func readIncomingClass(path string) (*templatekey.Class, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCapture, IncomingClassFile, err)
	}
	defer f.Close()
	c, err := templatekey.DecodeClass(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCapture, IncomingClassFile, err)
	}
	return c, nil
}

// checkSingleLinks refuses (ErrCapture) a regular file of capture with
// more than one hard link: its other name could change the payload after
// the publication. It runs before the publication ID is reserved;
// hashArtifact checks again, on the descriptor it hashes.
func checkSingleLinks(capture string) error {
	entries, err := os.ReadDir(capture)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue // openCapture refuses it
		}
		f, err := openNoFollow(filepath.Join(capture, e.Name()))
		if err != nil {
			return err
		}
		n, err := linkCount(f)
		f.Close()
		if err != nil {
			return err
		}
		if n != 1 {
			return hardLinked(e.Name(), n)
		}
	}
	return nil
}

// hardLinked is the refusal of artifact name with n hard links.
func hardLinked(name string, n uint64) error {
	return fmt.Errorf("%w: %s has %d hard links, want 1: publish a copy", ErrCapture, name, n)
}

// classRefused reports whether err is templatekey's refusal of a class:
// for an incoming directory, its class.json is part of the capture.
func classRefused(err error) bool {
	for _, e := range []error{templatekey.ErrClassInvalid, templatekey.ErrClassTooLarge, templatekey.ErrClassMismatch, templatekey.ErrEncodingVersion, templatekey.ErrNoManifest} {
		if errors.Is(err, e) {
			return !errors.Is(err, ErrCapture)
		}
	}
	return false
}

// hashArtifact returns the SHA-256 of the first f.Size bytes of f.File,
// holes read as zeros (copySparse without an output), after fsyncing it:
// the bytes were written through the mount and may not be on disk yet.
func hashArtifact(f manifest.CaptureFile, progress *progressCounter) (string, error) {
	if n, err := linkCount(f.File); err != nil || n != 1 {
		if err == nil {
			err = hardLinked(f.Name, n)
		}
		return "", err
	}
	h := sha256.New()
	if err := copySparse(nil, f.File, f.Size, countingHash{h, progress}); err != nil {
		return "", err
	}
	if err := syncFile(faultPayloadFsync, f.File); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// linkArtifacts hard-links every file of c into staging.
func linkArtifacts(staging string, c *manifest.Capture) error {
	for _, f := range c.Files {
		if err := fault(faultPayloadWrite); err != nil {
			return &os.LinkError{Op: "link", Old: f.File.Name(), New: staging, Err: err}
		}
		if err := os.Link(filepath.Join(c.Dir, f.Name), filepath.Join(staging, f.Name)); err != nil {
			return err
		}
	}
	return nil
}

// unlinkIncoming removes the published names of incoming dir and its
// class.json, makes the payload files read-only, and fsyncs the
// directories.
func (s *Store) unlinkIncoming(dir string, g Generation) error {
	capture := filepath.Join(dir, IncomingCaptureDir)
	for _, a := range g.Artifacts {
		if err := os.Remove(filepath.Join(capture, a.Name)); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(s.dir, PayloadDir, g.ID.String(), a.Name), 0o400); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, IncomingClassFile)); err != nil {
		return err
	}
	for _, d := range []string{capture, dir} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// recoverIncoming removes, from every incoming capture directory, the
// names that a publication interrupted after its commit left behind: files
// with more than one hard link (only linkArtifacts makes a second one, and
// recover has already removed the links of publications that never
// committed). It runs at Open after recover.
func (s *Store) recoverIncoming() error {
	names, err := s.IncomingNames()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := s.removePublishedNames(name); err != nil {
			return err
		}
	}
	return nil
}

// removePublishedNames removes the files of incoming/<name>/capture/ that
// are a second hard link of the payload file of the same name of some
// generation, and then its class.json (consumed by the same publication),
// durably. A file hard-linked elsewhere is the user's: it stays (its
// publication is refused, checkSingleLinks).
func (s *Store) removePublishedNames(name string) error {
	capture := filepath.Join(s.dir, IncomingDir, name, IncomingCaptureDir)
	entries, err := os.ReadDir(capture)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	removed := false
	for _, e := range entries {
		p := filepath.Join(capture, e.Name())
		f, err := openNoFollow(p)
		if err != nil {
			return err
		}
		n, err := linkCount(f)
		f.Close()
		if err != nil {
			return err
		}
		if n > 1 && s.isPayloadLink(p, e.Name()) {
			s.log.Info("removing published name left in an incoming directory", "path", p)
			if err := os.Remove(p); err != nil {
				return err
			}
			removed = true
		}
	}
	if !removed {
		return nil
	}
	if err := os.Remove(filepath.Join(filepath.Dir(capture), IncomingClassFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, d := range []string{capture, filepath.Dir(capture)} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// isPayloadLink reports whether the file at path is payload/<gen>/<name>
// of some generation directory.
func (s *Store) isPayloadLink(path, name string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	gens, _ := os.ReadDir(filepath.Join(s.dir, PayloadDir))
	for _, g := range gens {
		if other, err := os.Lstat(filepath.Join(s.dir, PayloadDir, g.Name(), name)); err == nil && os.SameFile(fi, other) {
			return true
		}
	}
	return false
}

// incomingLink finds the incoming name that is a second hard link of the
// payload file at path, as a crash after a publication's commit leaves it
// (PublishIncoming). It returns that name, relative to the store, and the
// repair that removes it (removePublishedNames), or "" and nil.
func (s *Store) incomingLink(path string) (string, func() error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", nil
	}
	names, err := s.IncomingNames()
	if err != nil {
		return "", nil
	}
	for _, name := range names {
		capture := filepath.Join(s.dir, IncomingDir, name, IncomingCaptureDir)
		entries, _ := os.ReadDir(capture)
		for _, e := range entries {
			if other, err := os.Lstat(filepath.Join(capture, e.Name())); err == nil && os.SameFile(fi, other) {
				return filepath.Join(IncomingDir, name, IncomingCaptureDir, e.Name()), func() error { return s.removePublishedNames(name) }
			}
		}
	}
	return "", nil
}
