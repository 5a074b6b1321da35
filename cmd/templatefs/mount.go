package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/fs"
	"templatefs/leasefs"
	"templatefs/store"
)

func runMount(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("mount", flag.ContinueOnError)
	allowOther := fl.Bool("allow-other", false, "let other users read the mount (FUSE allow_other)")
	debug := fl.Bool("debug", false, "log every FUSE request")
	pos, err := parseFlags(fl, args, 2)
	if err != nil {
		return err
	}
	st, err := store.Open(pos[0], store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	return serve(st, pos[1], fs.MountOptions{AllowOther: *allowOther, Debug: *debug}, func() {
		fmt.Fprintf(stdout, "mounted %s at %s\n", pos[0], pos[1])
	})
}

// serve mounts st at mnt, calls ready, and serves until SIGINT or SIGTERM.
// A mountpoint left behind by a killed daemon (ENOTCONN) is detached first.
// On a signal the mount is unmounted cleanly when nothing holds it open and
// lazily otherwise; serve then waits until the kernel lets go.
func serve(st *store.Store, mnt string, opts fs.MountOptions, ready func()) error {
	if _, err := os.Stat(mnt); errors.Is(err, syscall.ENOTCONN) {
		slog.Warn("mountpoint is a dead mount left by a killed daemon; detaching it", "mountpoint", mnt)
		if err := detach(mnt); err != nil {
			return fmt.Errorf("detach dead mount %s: %w", mnt, err)
		}
	}
	lfs, err := leasefs.New(st, leasefs.Options{})
	if err != nil {
		return err
	}
	srv, err := fs.Mount(mnt, lfs, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	slog.Info("mounted", "store", st.Dir(), "mountpoint", mnt)
	ready()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		slog.Info("mount ended by an external unmount", "mountpoint", mnt)
		return nil
	case s := <-sig:
		unmount(srv, mnt, s)
	}
	<-done
	slog.Info("unmounted", "mountpoint", mnt)
	return nil
}

func unmount(srv *fuse.Server, mnt string, s os.Signal) {
	err := srv.Unmount()
	if err == nil {
		slog.Info("unmounting cleanly", "signal", s.String(), "mountpoint", mnt)
		return
	}
	slog.Warn("mount is busy; detaching lazily, open files keep working until closed",
		"signal", s.String(), "mountpoint", mnt, "reason", err)
	if err := detach(mnt); err != nil {
		slog.Error("lazy unmount failed", "mountpoint", mnt, "err", err)
	}
}

// detach lazily unmounts mnt: umount2(MNT_DETACH) as root, fusermount3 -uz
// otherwise.
func detach(mnt string) error {
	if os.Geteuid() == 0 {
		return unix.Unmount(mnt, unix.MNT_DETACH)
	}
	out, err := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 -u -z: %w: %s", err, out)
	}
	return nil
}

// demoMemory is the logical size of each demo capture's memory.bin.
const demoMemory = 256 << 20

func runDemo(args []string, stdout io.Writer) error {
	if _, err := parseFlags(flag.NewFlagSet("demo", flag.ContinueOnError), args, 0); err != nil {
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
	return serve(st, mnt, fs.MountOptions{}, func() {
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
