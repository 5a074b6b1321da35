package ociartifact

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"templatefs/store/templatekey"
)

// Remote is a generation found in a registry: its manifest's descriptor,
// config, class and layers (Layers[i] carries Config.Artifacts[i]).
type Remote struct {
	Manifest ocispec.Descriptor
	Config   Config
	Class    *templatekey.Class
	Layers   []ocispec.Descriptor
}

// Resolve fetches and checks the manifest and config that tag names in
// repo (each read with its size bounded and its digest verified): an
// image manifest with this package's config media type, a config that
// DecodeConfig accepts, and layers that match its artifacts (checkManifest).
// It fetches no layer.
func Resolve(ctx context.Context, repo *remote.Repository, tag string) (Remote, error) {
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		return Remote{}, err
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		return Remote{}, fmt.Errorf("%w: %s is a %s, want an image manifest", ErrLayout, tag, desc.MediaType)
	}
	mb, err := fetchBounded(ctx, repo.Manifests(), desc, MaxManifestSize)
	if err != nil {
		return Remote{}, fmt.Errorf("manifest: %w", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return Remote{}, fmt.Errorf("%w: manifest: %w", ErrLayout, err)
	}
	if m.Config.MediaType != ConfigMediaType {
		return Remote{}, fmt.Errorf("%w: config media type %q, want %q", ErrLayout, m.Config.MediaType, ConfigMediaType)
	}
	cb, err := fetchBounded(ctx, repo.Blobs(), m.Config, MaxConfigSize)
	if err != nil {
		return Remote{}, fmt.Errorf("config: %w", err)
	}
	cfg, class, err := DecodeConfig(cb)
	if err != nil {
		return Remote{}, err
	}
	if err := checkManifest(m, cfg); err != nil {
		return Remote{}, err
	}
	return Remote{Manifest: desc, Config: cfg, Class: class, Layers: m.Layers}, nil
}

// fetchBounded reads the blob desc names, refusing one larger than limit
// before reading it, and verifies its size and digest.
func fetchBounded(ctx context.Context, f content.Fetcher, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size < 0 || desc.Size > limit {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrLayout, desc.Size, limit)
	}
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("%w: digest %q: %w", ErrLayout, desc.Digest, err)
	}
	return content.FetchAll(ctx, f, desc)
}

// Destination is where a pulled artifact is written: the file of the
// staging directory.
type Destination interface {
	io.WriterAt
	Truncate(size int64) error
}

// Fetch downloads layer (the encoding of artifact a) into dst, holes
// restored: it reads the header and map (DecodeHeader), writes the data
// where the map says, and verifies the blob's size and OCI digest at its
// end. On any error dst holds an unverified partial file, which the
// caller discards. progress (may be nil) is told the blob bytes read.
func Fetch(ctx context.Context, repo *remote.Repository, layer ocispec.Descriptor, a Artifact, dst Destination, progress func(n int64) error) error {
	if err := layer.Digest.Validate(); err != nil {
		return fmt.Errorf("%w: layer digest %q: %w", ErrLayout, layer.Digest, err)
	}
	rc, err := repo.Blobs().Fetch(ctx, layer)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr := content.NewVerifyReader(rc, layer)
	sp, err := DecodeHeader(vr, a.Size)
	if err != nil {
		return err
	}
	if progress != nil {
		if err := progress(int64(headerSize + len(sp.Extents)*extentSize)); err != nil {
			return err
		}
	}
	if err := sp.WriteData(vr, dst, dst.Truncate, progress); err != nil {
		return err
	}
	if err := vr.Verify(); err != nil {
		return fmt.Errorf("blob %s: %w", layer.Digest, err)
	}
	return nil
}
