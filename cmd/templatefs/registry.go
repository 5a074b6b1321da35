package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"templatefs/internal/ociartifact"
	"templatefs/store"
)

// registryFlags are the flags push and pull share.
type registryFlags struct {
	plainHTTP    *bool
	dockerConfig *string
}

func addRegistryFlags(fl *flag.FlagSet) registryFlags {
	return registryFlags{
		plainHTTP:    fl.Bool("plain-http", false, "talk HTTP, not HTTPS, to the registry (one on loopback or a trusted network)"),
		dockerConfig: fl.String("docker-config", defaultDockerConfig(), "read registry credentials from `DIR`/config.json, credential helpers included, as docker and oras do; the default is $DOCKER_CONFIG, else ~/.docker"),
	}
}

// defaultDockerConfig is the Docker configuration directory docker uses:
// $DOCKER_CONFIG, else ~/.docker; "" without either.
func defaultDockerConfig() string {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return dir
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".docker")
	}
	return ""
}

// resolve sets --docker-config on fl, as an absolute path, so that a
// daemon running the operation reads the caller's credentials, not its
// own.
func (r registryFlags) resolve(fl *flag.FlagSet) error {
	if *r.dockerConfig == "" {
		return usagef("no --docker-config given, and neither DOCKER_CONFIG nor a home directory to default to")
	}
	return fl.Set("docker-config", absPath(*r.dockerConfig))
}

// blockProgress turns a step's store.Progress into the Progress of a
// registry transfer that also stops once st is interrupted (a stopping
// daemon).
func blockProgress(st *store.Store, p store.Progress) ociartifact.Progress {
	return func(done, total int64) error {
		if err := st.Interrupted(); err != nil {
			return err
		}
		if p != nil {
			p(done, total)
		}
		return nil
	}
}

// registryError is err of a transfer with REF, with what to do about a
// registry that answered HTTPS in plain HTTP: give --plain-http.
func registryError(err error) error {
	if errors.Is(err, http.ErrSchemeMismatch) {
		return fmt.Errorf("%w (the registry talks plain HTTP: give --plain-http if it is on loopback or a trusted network)", err)
	}
	return err
}
