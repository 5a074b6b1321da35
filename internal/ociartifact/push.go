package ociartifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
)

// Progress is told the bytes done of a step's total after every block; a
// non-nil error stops the step with it.
type Progress func(done, total int64) error

// PushResult says what a push did.
type PushResult struct {
	Manifest ocispec.Descriptor
	// Uploaded and Skipped name the artifacts whose blobs were sent, and
	// those the registry held already.
	Uploaded, Skipped []string
	// DataBytes is the artifacts' data (what is not a hole); WireBytes the
	// blob bytes sent.
	DataBytes, WireBytes int64
}

// Push uploads the generation cfg describes to repo under tag: each
// artifact (open gives its payload file) as a layer in the sparse
// encoding, a blob the registry already holds not again, then the config
// and manifest, and last the tag. The manifest is reproducible (its
// creation time is cfg.PublishedAt), so pushing a generation again makes
// the same digest. progress (may be nil) sees the blob bytes sent.
func Push(ctx context.Context, repo *remote.Repository, tag string, cfg Config, open func(name string) (*os.File, error), progress Progress) (PushResult, error) {
	var res PushResult
	type layer struct {
		desc ocispec.Descriptor
		sp   Sparse
	}
	var layers []layer
	for _, a := range cfg.Artifacts {
		f, err := open(a.Name)
		if err != nil {
			return res, err
		}
		sp, err := Scan(f, a.Size)
		var d digest.Digest
		if err == nil {
			d, err = encodedDigest(sp, f)
		}
		f.Close()
		if err != nil {
			return res, fmt.Errorf("%s: %w", a.Name, err)
		}
		layers = append(layers, layer{desc: ocispec.Descriptor{
			MediaType: LayerMediaType,
			Digest:    d,
			Size:      sp.EncodedLen(),
			Annotations: map[string]string{
				AnnotationTitle:  a.Name,
				AnnotationSize:   strconv.FormatInt(a.Size, 10),
				AnnotationSHA256: a.SHA256,
			},
		}, sp: sp})
		res.DataBytes += sp.DataLen()
	}
	var total int64
	for _, l := range layers {
		total += l.desc.Size
	}
	sent := &counter{total: total, progress: progress}
	for i, l := range layers {
		name := cfg.Artifacts[i].Name
		held, err := repo.Exists(ctx, l.desc)
		if err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		if held {
			res.Skipped = append(res.Skipped, name)
			if err := sent.add(l.desc.Size); err != nil {
				return res, err
			}
			continue
		}
		if err := pushLayer(ctx, repo, l.desc, l.sp, name, open, sent); err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		res.Uploaded = append(res.Uploaded, name)
		res.WireBytes += l.desc.Size
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return res, err
	}
	cfgDesc := ocispec.Descriptor{MediaType: ConfigMediaType, Digest: digest.FromBytes(cfgJSON), Size: int64(len(cfgJSON))}
	if err := pushIfMissing(ctx, repo, cfgDesc, cfgJSON); err != nil {
		return res, fmt.Errorf("config: %w", err)
	}
	descs := make([]ocispec.Descriptor, len(layers))
	for i, l := range layers {
		descs[i] = l.desc
	}
	res.Manifest, err = oras.PackManifest(ctx, repo, oras.PackManifestVersion1_0, "", oras.PackManifestOptions{
		ConfigDescriptor:    &cfgDesc,
		Layers:              descs,
		ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: cfg.PublishedAt.UTC().Format(time.RFC3339)},
	})
	if err != nil {
		return res, fmt.Errorf("manifest: %w", err)
	}
	if err := repo.Tag(ctx, res.Manifest, tag); err != nil {
		return res, fmt.Errorf("tag %s: %w", tag, err)
	}
	return res, nil
}

// encodedDigest is the OCI digest of the encoding of f.
func encodedDigest(sp Sparse, f *os.File) (digest.Digest, error) {
	h := sha256.New()
	if _, err := sp.WriteTo(h, f); err != nil {
		return "", err
	}
	return digest.NewDigest(digest.SHA256, h), nil
}

// pushLayer streams the encoding of artifact name to the registry, which
// checks it against desc's digest and size.
func pushLayer(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, sp Sparse, name string, open func(string) (*os.File, error), sent *counter) error {
	f, err := open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := sp.WriteTo(progressWriter{pw, sent}, f)
		pw.CloseWithError(err)
	}()
	err = repo.Push(ctx, desc, pr)
	pr.CloseWithError(err) // ends the writer if the push gave up early
	return err
}

func pushIfMissing(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, b []byte) error {
	held, err := repo.Exists(ctx, desc)
	if err != nil || held {
		return err
	}
	return repo.Push(ctx, desc, bytes.NewReader(b))
}

// counter adds up the bytes of one step for its Progress.
type counter struct {
	done, total int64
	progress    Progress
}

func (c *counter) add(n int64) error {
	c.done = min(c.done+n, c.total)
	if c.progress == nil {
		return nil
	}
	return c.progress(c.done, c.total)
}

// progressWriter counts what is written through it.
type progressWriter struct {
	w io.Writer
	c *counter
}

func (p progressWriter) Write(b []byte) (int, error) {
	if err := p.c.add(int64(len(b))); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
