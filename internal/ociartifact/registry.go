package ociartifact

import (
	"fmt"
	"path/filepath"

	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// CheckReference returns an error unless ref is a registry reference that
// names a tag or a digest (REGISTRY/REPOSITORY:TAG or
// REGISTRY/REPOSITORY@sha256:DIGEST). It reads nothing, so a command can
// refuse a malformed reference before it opens a store.
func CheckReference(ref string) error {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("reference %q: %w", ref, err)
	}
	if r.Reference == "" {
		return fmt.Errorf("reference %q names no tag: want REGISTRY/REPOSITORY:TAG (or, to pull, REGISTRY/REPOSITORY@sha256:DIGEST)", ref)
	}
	return nil
}

// Registry is a repository in an OCI registry.
type Registry = *remote.Repository

// Repository returns the repository of ref ("registry.example/templates/
// name:tag") and its tag, authenticating with the credentials of the Docker
// configuration directory dockerConfig (its config.json, credential
// helpers included, as docker and oras read it; a missing file means
// anonymous access). plainHTTP talks HTTP instead of HTTPS, for a registry
// on loopback or a trusted network. ref must name a tag or a digest.
func Repository(ref string, plainHTTP bool, dockerConfig string) (Registry, string, error) {
	if err := CheckReference(ref); err != nil {
		return nil, "", err
	}
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return nil, "", fmt.Errorf("reference %q: %w", ref, err)
	}
	tag := repo.Reference.Reference
	creds, err := credentials.NewStore(filepath.Join(dockerConfig, "config.json"), credentials.StoreOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("registry credentials: %w", err)
	}
	repo.PlainHTTP = plainHTTP
	repo.Client = &auth.Client{
		Client:     retry.DefaultClient,
		Cache:      auth.NewCache(),
		Credential: credentials.Credential(creds),
	}
	return repo, tag, nil
}
