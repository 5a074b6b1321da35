// Package ociartifact is the OCI artifact form of a templatefs generation:
// the layout of its manifest, config and layers (docs/fleet.md "OCI
// artifact layout"), the sparse encoding of each artifact (sparse.go), and
// the push and pull of one through any OCI registry with oras-go. It knows
// nothing of the store: the caller opens the payload files to push and
// gives the files to pull into.
package ociartifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// Media types of a generation artifact. The manifest is a plain OCI image
// manifest (image-spec 1.0 form, which every registry stores) whose config
// media type names it; its layers are the artifacts, in the generation's
// order, each in the sparse encoding.
const (
	ConfigMediaType = "application/vnd.templatefs.generation.config.v1+json"
	LayerMediaType  = "application/vnd.templatefs.artifact.sparse.v1"
)

// Layer annotations.
const (
	// AnnotationTitle is the artifact's name (manifest.bin, state.bin,
	// memory.bin, scratch.img), as oras names files.
	AnnotationTitle = ocispec.AnnotationTitle
	// AnnotationSize is the artifact's logical size in bytes, decimal.
	AnnotationSize = "io.templatefs.artifact.size"
	// AnnotationSHA256 is the artifact's SHA-256 over all its bytes, holes
	// read as zeros, lowercase hex: the digest the generation records.
	AnnotationSHA256 = "io.templatefs.artifact.sha256"
)

// FormatVersion is the version of Config this package writes and reads.
const FormatVersion = 1

// Limits on what a pull reads before it trusts it.
const (
	MaxManifestSize = 1 << 20
	MaxConfigSize   = 1 << 20
)

// Artifact is one payload file of the generation, as the source store
// recorded it.
type Artifact struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Config is the config blob: what a store needs to publish the generation
// again with the same key ID, and to check every byte it pulls. The key
// and eligibility are computed from manifest.bin (uploaded byte for byte)
// and the class, so the receiving store derives the same key ID, capture
// time and time anchors; KeyID and Key say what it must get.
type Config struct {
	FormatVersion int `json:"format_version"`
	// KeyID is the template key ID on the source host.
	KeyID string `json:"key_id"`
	// Key is the canonical key text; templatekey.IDOf(Key) == KeyID.
	Key string `json:"key"`
	// Class is the capture class, as templatekey.DecodeClass reads it.
	Class json.RawMessage `json:"class"`
	// Source names where it was pushed from: the source store's ID and
	// generation, and when that generation was published. Informational.
	SourceStore      string    `json:"source_store"`
	SourceGeneration string    `json:"source_generation"`
	PublishedAt      time.Time `json:"published_at"`
	// Artifacts are the generation's artifacts, manifest.bin first, in
	// the order of the manifest's layers.
	Artifacts []Artifact `json:"artifacts"`
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validArtifacts are the names a generation's artifacts may have.
var validArtifacts = map[string]bool{
	manifest.ManifestFileName: true,
	manifest.StateFileName:    true,
	manifest.MemoryFileName:   true,
	manifest.ScratchFileName:  true,
}

// ErrLayout is returned (wrapped, with what is wrong) for a manifest or
// config that is not a templatefs generation as this package writes it.
var ErrLayout = errors.New("not a templatefs generation artifact")

// DecodeConfig decodes and checks a config blob: known fields only, the
// format version, a key ID that is the digest of the key text, a class
// that templatekey accepts, and artifacts with distinct valid names
// (manifest.bin first), non-negative sizes and SHA-256 digests.
func DecodeConfig(b []byte) (Config, *templatekey.Class, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, nil, fmt.Errorf("%w: config: %w", ErrLayout, err)
	}
	if dec.More() {
		return Config{}, nil, fmt.Errorf("%w: config: trailing data", ErrLayout)
	}
	if c.FormatVersion != FormatVersion {
		return Config{}, nil, fmt.Errorf("%w: config format_version %d, this templatefs reads %d", ErrLayout, c.FormatVersion, FormatVersion)
	}
	if !hex64.MatchString(c.KeyID) || templatekey.IDOf([]byte(c.Key)) != c.KeyID {
		return Config{}, nil, fmt.Errorf("%w: config key_id %q is not the ID of its key text", ErrLayout, c.KeyID)
	}
	class, err := templatekey.DecodeClass(bytes.NewReader(c.Class))
	if err != nil {
		return Config{}, nil, fmt.Errorf("%w: config class: %w", ErrLayout, err)
	}
	if len(c.Artifacts) == 0 || c.Artifacts[0].Name != manifest.ManifestFileName {
		return Config{}, nil, fmt.Errorf("%w: config artifacts do not start with %s", ErrLayout, manifest.ManifestFileName)
	}
	seen := map[string]bool{}
	for _, a := range c.Artifacts {
		switch {
		case !validArtifacts[a.Name]:
			return Config{}, nil, fmt.Errorf("%w: config artifact name %q", ErrLayout, a.Name)
		case seen[a.Name]:
			return Config{}, nil, fmt.Errorf("%w: config artifact %s listed twice", ErrLayout, a.Name)
		case a.Size < 0:
			return Config{}, nil, fmt.Errorf("%w: config artifact %s has size %d", ErrLayout, a.Name, a.Size)
		case !hex64.MatchString(a.SHA256):
			return Config{}, nil, fmt.Errorf("%w: config artifact %s has SHA-256 %q", ErrLayout, a.Name, a.SHA256)
		}
		seen[a.Name] = true
	}
	return c, class, nil
}

// checkManifest checks that m is a generation's image manifest whose
// layers match the artifacts of c one to one: the layer media type, the
// title, size and SHA-256 annotations, and a blob no longer than the
// largest encoding of that size.
func checkManifest(m ocispec.Manifest, c Config) error {
	if len(m.Layers) != len(c.Artifacts) {
		return fmt.Errorf("%w: %d layers for %d artifacts", ErrLayout, len(m.Layers), len(c.Artifacts))
	}
	for i, l := range m.Layers {
		a := c.Artifacts[i]
		switch {
		case l.MediaType != LayerMediaType:
			return fmt.Errorf("%w: layer %d has media type %q, want %q", ErrLayout, i, l.MediaType, LayerMediaType)
		case l.Annotations[AnnotationTitle] != a.Name:
			return fmt.Errorf("%w: layer %d is titled %q, the config lists %s there", ErrLayout, i, l.Annotations[AnnotationTitle], a.Name)
		case l.Annotations[AnnotationSize] != fmt.Sprint(a.Size) || l.Annotations[AnnotationSHA256] != a.SHA256:
			return fmt.Errorf("%w: layer %d (%s) annotations disagree with the config's size and SHA-256", ErrLayout, i, a.Name)
		case l.Size < headerSize || l.Size > headerSize+MaxExtents*extentSize+a.Size:
			return fmt.Errorf("%w: layer %d (%s) is %d bytes, impossible for %d bytes of artifact", ErrLayout, i, a.Name, l.Size, a.Size)
		}
	}
	return nil
}
