package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"

	"templatefs/store/manifest"
)

// Pulls: a generation downloaded from an OCI registry (templatefs pull,
// internal/ociartifact) is staged in an incoming directory of its own,
// incoming/pull-<digest>/, named after the manifest's digest, and
// published from there like any incoming directory (its files are on the
// store's disk, so they are linked, not copied). The directory survives a
// killed pull and a restart (Open never empties incoming/), so the next
// pull of the same manifest keeps the artifacts already saved.

// PullStageName is the incoming directory name of the pull of the OCI
// manifest whose SHA-256 is manifestHex (lowercase hex).
func PullStageName(manifestHex string) string {
	return "pull-" + manifestHex[:min(32, len(manifestHex))]
}

// Expected is a generation as another store recorded it: the key ID and
// artifacts a pulled capture must reproduce exactly.
type Expected struct {
	KeyID     string
	Artifacts []Artifact
}

// ErrExpectedDiffers is returned when a pulled capture does not reproduce
// the generation its source recorded: another key ID, artifact list,
// size or SHA-256.
var ErrExpectedDiffers = errors.New("pulled capture differs from the generation pushed")

func (e *Expected) checkKey(keyID string, c *manifest.Capture) error {
	if e == nil {
		return nil
	}
	if keyID != e.KeyID {
		return fmt.Errorf("%w: key ID %s here, %s on the source", ErrExpectedDiffers, keyID, e.KeyID)
	}
	want := make([]string, len(e.Artifacts))
	for i, a := range e.Artifacts {
		want[i] = a.Name
	}
	got := make([]string, len(c.Files))
	for i, f := range c.Files {
		got[i] = f.Name
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%w: artifacts %v here, %v on the source", ErrExpectedDiffers, got, want)
	}
	return nil
}

func (e *Expected) checkArtifact(i int, a Artifact) error {
	if e == nil {
		return nil
	}
	if w := e.Artifacts[i]; a != w {
		return fmt.Errorf("%w: %s is %d bytes with SHA-256 %s, the source recorded %d bytes with %s", ErrExpectedDiffers, a.Name, a.Size, a.SHA256, w.Size, w.SHA256)
	}
	return nil
}

// Held returns a generation of keyID, not retiring, whose artifacts have
// exactly the names (in order), sizes and SHA-256 digests of arts, if the
// store holds one: a pull of it copies nothing.
func (s *Store) Held(keyID string, arts []Artifact) (Generation, bool, error) {
	var held Generation
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		return forEachLiveGeneration(tx, keyID, func(g Generation) {
			if !found && slices.Equal(g.Artifacts, arts) {
				held, found = g, true
			}
		})
	})
	return held, found, err
}

// PullStage is the staging directory of one pull, incoming/<name>/:
// class.json, a <artifact>.part file while an artifact downloads, and
// capture/<artifact> once it is complete and verified.
type PullStage struct {
	s    *Store
	name string
	dir  string
}

// StagePull makes (or, for a pull that was interrupted, reopens) the
// staging directory name and writes its class.json durably. Errors:
// MakeIncoming's, the system error.
func (s *Store) StagePull(name string, classJSON []byte) (*PullStage, error) {
	dir, err := s.changeableIncoming(name)
	if err != nil {
		return nil, err
	}
	if err := s.MakeIncoming(name); err != nil && !errors.Is(err, ErrExists) {
		return nil, err
	}
	p := &PullStage{s: s, name: name, dir: dir}
	if err := p.writeDurably(filepath.Join(dir, IncomingClassFile), classJSON); err != nil {
		return nil, err
	}
	return p, nil
}

// writeDurably replaces path with data: a temporary file, fsynced,
// renamed over it, the directory fsynced.
func (p *PullStage) writeDurably(path string, data []byte) error {
	tmp := path + ".part"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = syncNow(f.Sync())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncNow(syncDir(filepath.Dir(path)))
	}
	return p.s.readOnlyAfterSync(err)
}

// Saved reports whether artifact was downloaded, verified and saved by an
// earlier, interrupted pull of the same manifest.
func (p *PullStage) Saved(artifact string) bool {
	fi, err := os.Lstat(filepath.Join(p.dir, IncomingCaptureDir, artifact))
	return err == nil && fi.Mode().IsRegular()
}

// Create starts the download of artifact: a new, empty <artifact>.part
// (one an interrupted pull left is discarded).
func (p *PullStage) Create(artifact string) (*PullFile, error) {
	path := filepath.Join(p.dir, artifact+".part")
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &PullFile{f: f, s: p.s, name: artifact}, nil
}

// Save makes a verified download final: it fsyncs and closes f, renames
// it to capture/<artifact> and fsyncs the directories.
func (p *PullStage) Save(f *PullFile) error {
	err := syncNow(f.f.Sync())
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.f.Name(), filepath.Join(p.dir, IncomingCaptureDir, f.name))
	}
	for _, d := range []string{filepath.Join(p.dir, IncomingCaptureDir), p.dir} {
		if err == nil {
			err = syncNow(syncDir(d))
		}
	}
	if err != nil {
		return p.s.readOnlyAfterSync(err)
	}
	return nil
}

// Discard removes the staging directory and all it holds: what it holds
// cannot become the generation expected (Publish refused it).
func (p *PullStage) Discard() error {
	if err := os.RemoveAll(p.dir); err != nil {
		return err
	}
	return p.s.readOnlyAfterSync(syncNow(syncDir(filepath.Dir(p.dir))))
}

// Publish publishes the staged capture as PublishIncoming does, checking
// before anything is committed that it has exactly want's key ID and
// artifacts (ErrExpectedDiffers otherwise), then removes the emptied
// staging directory. Errors: PublishIncoming's and ErrExpectedDiffers;
// on any, nothing is published. progress (may be nil) sees the hashing.
func (p *PullStage) Publish(want Expected, progress Progress) (Generation, error) {
	g, err := p.s.publishIncoming(p.name, &want, progress)
	if err != nil {
		return Generation{}, err
	}
	if err := p.s.RemoveIncoming(p.name); err != nil {
		p.s.log.Error("published a pull, but could not remove its staging directory", "incoming", p.name, "err", err.Error())
	}
	return g, nil
}

// PullFile is an artifact being downloaded into a pull's staging
// directory. Its writes fail with ErrInterrupted once the store is
// interrupted (a stopping daemon). Kill point pull-midway-<artifact> is
// the first write after MidwayBytes of the artifact's data are written.
type PullFile struct {
	f       *os.File
	s       *Store
	name    string
	written int64
}

// MidwayBytes is where kill point pull-midway-<artifact> sits in an
// artifact's data.
const MidwayBytes = 512 << 10

// WriteAt writes b at off.
func (f *PullFile) WriteAt(b []byte, off int64) (int, error) {
	if f.s.interrupted.Load() {
		return 0, fmt.Errorf("pull of %s stopped: %w", f.name, ErrInterrupted)
	}
	if f.written >= MidwayBytes {
		failpoint("pull-midway-" + f.name)
	}
	n, err := f.f.WriteAt(b, off)
	f.written += int64(n)
	return n, err
}

// Truncate sets the file's length.
func (f *PullFile) Truncate(size int64) error { return f.f.Truncate(size) }

// Close closes an unsaved download; its .part file stays until the next
// Create of the same artifact.
func (f *PullFile) Close() error { return f.f.Close() }

// syncNow is the error of an fsync a pull's staging made: a *syncError,
// so that readOnlyAfterSync applies the store's policy to it.
func syncNow(err error) error {
	if err != nil {
		return &syncError{err}
	}
	return nil
}
