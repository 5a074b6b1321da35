package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"templatefs/internal/ociartifact"
	"templatefs/store"
	"templatefs/store/templatekey"
)

// preparePush parses push's command line; its operation uploads one
// generation as an OCI artifact (ociartifact.Push) and prints the
// reference with the manifest digest on the last line.
func preparePush(fl *flag.FlagSet, args []string) (storeOp, error) {
	rf := addRegistryFlags(fl)
	pos, err := parseFlags(fl, args)
	if err != nil {
		return storeOp{}, err
	}
	gen, err := store.ParseGenerationID(pos[1])
	if err != nil {
		return storeOp{}, usagef("GEN %q: %v", pos[1], err)
	}
	if err := rf.resolve(fl); err != nil {
		return storeOp{}, err
	}
	ref := pos[2]
	if strings.Contains(ref, "@") {
		return storeOp{}, usagef("REF %q names a digest: push tags what it uploads, give REGISTRY/REPOSITORY:TAG", ref)
	}
	if err := ociartifact.CheckReference(ref); err != nil {
		return storeOp{}, usagef("REF: %v", err)
	}
	run := func(st *store.Store, out opOutput) error {
		cfg, err := pushConfig(st, gen)
		if err != nil {
			return err
		}
		repo, tag, err := ociartifact.Repository(ref, *rf.plainHTTP, *rf.dockerConfig)
		if err != nil {
			return err
		}
		open := func(name string) (*os.File, error) { return st.OpenPayload(gen, name) }
		res, err := ociartifact.Push(context.Background(), repo, tag, cfg, open, blockProgress(st, out.progress("upload")))
		if err != nil {
			return fmt.Errorf("push %s to %s: %w", gen, ref, registryError(err))
		}
		for _, name := range res.Skipped {
			fmt.Fprintf(out.stdout, "%s: the registry holds it already\n", name)
		}
		fmt.Fprintf(out.stdout, "pushed %s (key %s): %s of data, %s sent\n%s\n", gen, cfg.KeyID, mib(res.DataBytes), mib(res.WireBytes), pinned(ref, res.Manifest.Digest.String()))
		return nil
	}
	return storeOp{dir: pos[0], args: commandLine(fl, pos[0], pos[1], ref), run: run}, nil
}

// pushConfig is the config blob of generation gen: its key, the class
// recovered from the key text, and its artifacts. Only a published
// generation is pushed: a tombstoned one is quarantined.
func pushConfig(st *store.Store, gen store.GenerationID) (ociartifact.Config, error) {
	g, err := st.Generation(gen)
	if err != nil {
		return ociartifact.Config{}, err
	}
	if g.State != store.Published {
		return ociartifact.Config{}, fmt.Errorf("%s is %s: only a published generation is pushed", gen, g.State)
	}
	k, err := st.Key(g.KeyID)
	if err != nil {
		return ociartifact.Config{}, err
	}
	class, err := templatekey.ClassFromText(k.Canonical)
	if err != nil {
		return ociartifact.Config{}, fmt.Errorf("key %s: %w", g.KeyID, err)
	}
	classJSON, err := json.Marshal(class)
	if err != nil {
		return ociartifact.Config{}, err
	}
	info, err := st.Info()
	if err != nil {
		return ociartifact.Config{}, err
	}
	cfg := ociartifact.Config{
		FormatVersion:    ociartifact.FormatVersion,
		KeyID:            g.KeyID,
		Key:              k.Canonical,
		Class:            classJSON,
		SourceStore:      info.StoreID,
		SourceGeneration: gen.String(),
		PublishedAt:      g.PublishedAt,
	}
	for _, a := range g.Artifacts {
		cfg.Artifacts = append(cfg.Artifacts, ociartifact.Artifact(a))
	}
	if templatekey.IDOf([]byte(k.Canonical)) != g.KeyID {
		return ociartifact.Config{}, errors.New("the key text recorded does not hash to its ID: run templatefs fsck")
	}
	return cfg, nil
}

// mib formats n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
