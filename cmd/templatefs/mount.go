package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"templatefs/leasefs"
	"templatefs/store"
)

// Backends `templatefs mount --backend` accepts.
const (
	backendGoFuse  = "go-fuse" // Linux default: kernel FUSE through go-fuse (package fs)
	backendCgofuse = "cgofuse" // WinFsp on Windows (the only one there), libfuse3 on Linux with -tags fuse3
)

// mountConfig is what `templatefs mount` was asked for.
type mountConfig struct {
	backend       string
	allowOther    bool
	debug         bool
	noPassthrough bool
}

func runMount(fl *flag.FlagSet, args []string, stdout io.Writer) error {
	var cfg mountConfig
	fl.StringVar(&cfg.backend, "backend", defaultBackend, "FUSE `BACKEND`: go-fuse (Linux) or cgofuse (Windows; Linux in a binary built with -tags fuse3)")
	fl.BoolVar(&cfg.allowOther, "allow-other", false, "let other users read the mount (FUSE allow_other; as non-root, needs user_allow_other in /etc/fuse.conf)")
	fl.BoolVar(&cfg.debug, "debug", false, "log every FUSE request and reply")
	fl.BoolVar(&cfg.noPassthrough, "no-passthrough", false, "serve payload reads through the daemon instead of FUSE passthrough (go-fuse)")
	pos, err := parseFlags(fl, args)
	if err != nil {
		return err
	}
	if cfg.backend != backendGoFuse && cfg.backend != backendCgofuse {
		return usagef("--backend %q: want %s or %s", cfg.backend, backendGoFuse, backendCgofuse)
	}
	st, err := store.Open(pos[0], store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkMountpoint(pos[1], st.Dir()); err != nil {
		return err
	}
	stopControl, err := startControl(st) // commands on the store run through this daemon until stopControl
	if err != nil {
		return err
	}
	defer stopControl()
	lfs, err := leasefs.New(st, leasefs.Options{})
	if err != nil {
		return err
	}
	return serve(lfs, pos[1], cfg, func() {
		fmt.Fprintf(stdout, "mounted %s at %s\n", pos[0], pos[1])
	})
}

// checkMountpoint refuses a mountpoint inside the store (the mount would
// hide the store from itself), then applies the platform's own checks
// (checkMountpointDir).
func checkMountpoint(mnt, storeDir string) error {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real // store.Open resolved storeDir's links too (a dead mount does not resolve)
	}
	if rel, err := filepath.Rel(storeDir, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("mountpoint %s is inside the store %s: choose a directory outside it", mnt, storeDir)
	}
	return checkMountpointDir(abs)
}

// demoMemory is the logical size of each demo capture's memory.bin.
const demoMemory = 256 << 20

func runDemo(fl *flag.FlagSet, args []string, stdout io.Writer) error {
	if _, err := parseFlags(fl, args); err != nil {
		return err
	}
	top, err := os.MkdirTemp("", "templatefs-demo-")
	if err != nil {
		return err
	}
	storeDir, mnt := filepath.Join(top, "store"), filepath.Join(top, "mnt")
	if err := store.Init(storeDir); err != nil {
		return err
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return err
	}
	st, err := store.Open(storeDir, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	var gens []store.Generation
	for seed := uint64(1); seed <= 2; seed++ {
		out := filepath.Join(top, fmt.Sprintf("sample%d", seed))
		if err := writeSample(out, 6, demoMemory, seed); err != nil {
			return err
		}
		class, err := readClass(filepath.Join(out, "class.json"))
		if err != nil {
			return err
		}
		g, err := st.Publish(filepath.Join(out, "capture"), class)
		if err != nil {
			return err
		}
		gens = append(gens, g)
	}
	lfs, err := leasefs.New(st, leasefs.Options{})
	if err != nil {
		return err
	}
	return serve(lfs, mnt, mountConfig{backend: defaultBackend}, func() {
		g := gens[0].ID
		fmt.Fprintf(stdout, `templatefs demo: a store with two generations of one key, mounted.

  store:      %[1]s
  mountpoint: %[2]s
  captures:   %[3]s/sample1/capture, %[3]s/sample2/capture

Try, in another terminal:
  ls %[2]s/generations %[2]s/keys/*
  cat %[2]s/store %[2]s/keys/*/generations
  cat %[2]s/generations/%[4]s/status %[2]s/generations/%[4]s/manifest
  ls -ls %[2]s/generations/%[4]s/payload              # memory.bin is sparse
  cmp %[3]s/sample1/capture/memory.bin %[2]s/generations/%[4]s/payload/memory.bin
  touch %[2]s/generations/%[4]s/leases/clone-1        # acquire a lease
  cat %[2]s/leases/clone-1
  mv %[2]s/generations/%[4]s %[2]s/tombstones/        # tombstone it
  touch %[2]s/tombstones/%[4]s/leases/clone-2         # refused: Operation not permitted

Press Ctrl-C to unmount. Remove everything afterwards with: rm -rf %[3]s
`, storeDir, mnt, top, g)
	})
}
