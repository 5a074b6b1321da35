package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"

	"templatefs/internal/ociartifact"
	"templatefs/store"
)

// preparePull parses pull's command line; its operation downloads a
// generation pushed with push into a staging directory of the store,
// verifies it and publishes it with the source's key ID, printing the
// local generation ID on the last line.
func preparePull(fl *flag.FlagSet, args []string) (storeOp, error) {
	rf := addRegistryFlags(fl)
	pos, err := parseFlags(fl, args)
	if err != nil {
		return storeOp{}, err
	}
	if err := rf.resolve(fl); err != nil {
		return storeOp{}, err
	}
	ref := pos[0]
	if err := ociartifact.CheckReference(ref); err != nil {
		return storeOp{}, usagef("REF: %v", err)
	}
	run := func(st *store.Store, out opOutput) error {
		repo, tag, err := ociartifact.Repository(ref, *rf.plainHTTP, *rf.dockerConfig)
		if err != nil {
			return err
		}
		g, err := pull(context.Background(), st, out, ref, repo, tag)
		if err != nil {
			return fmt.Errorf("pull %s: %w", ref, registryError(err))
		}
		fmt.Fprintf(out.stdout, "key %s\n%s\n", g.KeyID, g.ID)
		return nil
	}
	return storeOp{dir: pos[1], args: commandLine(fl, ref, pos[1]), run: run}, nil
}

// pulls serialises the pulls a daemon runs for its clients: two pulls of
// one manifest share its staging directory. (Offline, the store's lock
// admits one command.)
var pulls sync.Mutex

// pull fetches and checks the manifest and config, returns the generation
// the store already holds with the same key and artifacts (copying
// nothing), else downloads the artifacts not saved by an interrupted pull
// into the staging directory and publishes it.
func pull(ctx context.Context, st *store.Store, out opOutput, ref string, repo ociartifact.Registry, tag string) (store.Generation, error) {
	pulls.Lock()
	defer pulls.Unlock()
	remote, err := ociartifact.Resolve(ctx, repo, tag)
	if err != nil {
		return store.Generation{}, err
	}
	want := store.Expected{KeyID: remote.Config.KeyID}
	for _, a := range remote.Config.Artifacts {
		want.Artifacts = append(want.Artifacts, store.Artifact(a))
	}
	if g, held, err := st.Held(want.KeyID, want.Artifacts); err != nil || held {
		if err == nil {
			err = usableHeld(g)
		}
		if err == nil {
			fmt.Fprintf(out.stdout, "the store holds %s already as %s: nothing copied\n", pinned(ref, remote.Manifest.Digest.String()), g.ID)
		}
		return g, err
	}
	stage, err := st.StagePull(store.PullStageName(remote.Manifest.Digest.Encoded()), remote.Config.Class)
	if err != nil {
		return store.Generation{}, err
	}
	var total int64
	for i, a := range remote.Config.Artifacts {
		if !stage.Saved(a.Name) {
			total += remote.Layers[i].Size
		}
	}
	progress := blockProgress(st, out.progress("download"))
	var done int64
	count := func(n int64) error { done += n; return progress(min(done, total), total) }
	for i, a := range remote.Config.Artifacts {
		if stage.Saved(a.Name) {
			fmt.Fprintf(out.stdout, "%s: kept, downloaded and verified by an earlier pull\n", a.Name)
			continue
		}
		f, err := stage.Create(a.Name)
		if err != nil {
			return store.Generation{}, err
		}
		if err := ociartifact.Fetch(ctx, repo, remote.Layers[i], a, f, count); err != nil {
			f.Close()
			return store.Generation{}, fmt.Errorf("download %s: %w (the artifacts verified so far are kept: pull again to resume)", a.Name, err)
		}
		if err := stage.Save(f); err != nil {
			return store.Generation{}, err
		}
		fmt.Fprintf(out.stdout, "%s: downloaded %s and verified\n", a.Name, mib(remote.Layers[i].Size))
	}
	g, err := stage.Publish(want, out.progress("verify"))
	if errors.Is(err, store.ErrExpectedDiffers) {
		if derr := stage.Discard(); derr != nil {
			err = fmt.Errorf("%w (and removing what was downloaded failed: %v)", err, derr)
		}
	}
	if err != nil {
		return store.Generation{}, err
	}
	fmt.Fprintf(out.stdout, "pulled %s as %s\n", pinned(ref, remote.Manifest.Digest.String()), g.ID)
	return g, nil
}

// pinned is ref with the manifest digest, REF@sha256:…, as push prints
// it; a ref that names the digest already is left as it is.
func pinned(ref, digest string) string {
	if strings.Contains(ref, "@") {
		return ref
	}
	return ref + "@" + digest
}

// usableHeld refuses a held generation that grants no lease, as publish
// does for a capture already published.
func usableHeld(g store.Generation) error {
	if g.State == store.Published {
		return nil
	}
	return fmt.Errorf("the store holds it already as %s, which is %s and grants no new leases: lift it (mv MNT/tombstones/%s MNT/generations/)", g.ID, g.State, g.ID)
}
