//go:build linux

package main

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"templatefs/leasefs"
	"templatefs/store"
	"templatefs/tests/harness"
)

// captureLog sends the default logger's lines to the returned buffer
// until the test ends. Tests that use it must not run in parallel.
func captureLog(t *testing.T) *harness.SyncBuffer {
	var log harness.SyncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &log
}

// waitLog waits (a generous bound that only catches hangs) until log
// holds want.
func waitLog(t *testing.T, log *harness.SyncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(harness.CommandTimeout)
	for !strings.Contains(log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q within %v:\n%s", want, harness.CommandTimeout, log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSecondSignalWhileStopping: a real daemon (serve, go-fuse) gets
// SIGTERM while a stop hook (a control operation in flight) is still
// running; a second SIGTERM is logged at once with the stops it waits
// for, by name, and the store is released (logged once) only after the
// hook returned.
func TestSecondSignalWhileStopping(t *testing.T) {
	harness.RequireFUSE(t)
	log := captureLog(t)
	dir := t.TempDir()
	storeDir, mnt := filepath.Join(dir, "store"), filepath.Join(dir, "mnt")
	if err := store.Init(storeDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(storeDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{st: st}
	if d.lfs, err = leasefs.New(st, leasefs.Options{}); err != nil {
		t.Fatal(err)
	}
	entered, unblock := make(chan struct{}), make(chan struct{})
	d.OnStop("exit tracking", func() {})
	d.OnStop("control operations in flight", func() {
		close(entered)
		<-unblock
	})
	ready, served := make(chan struct{}), make(chan error, 1)
	go func() { served <- serve(d, mnt, mountConfig{backend: backendGoFuse}, func() { close(ready) }) }()
	t.Cleanup(func() { harness.Unmount(t, mnt) })
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("serve: %v", err)
	}

	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	<-entered
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitLog(t, log, "stopping: waiting for control operations in flight, exit tracking, "+detachStep+" to stop before releasing the store")
	if strings.Contains(log.String(), "store released") {
		t.Errorf("store released logged while a stop still runs:\n%s", log.String())
	}
	close(unblock)
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(harness.StopTimeout):
		t.Fatalf("serve still running %v after the stop hook returned:\n%s", harness.StopTimeout, log.String())
	}
	if n := strings.Count(log.String(), "store released"); n != 1 {
		t.Errorf("store released logged %d times, want once:\n%s", n, log.String())
	}
}

// TestReleaseLineOnlyAtSignal: a mount refused after the store was
// opened (the mountpoint is inside the store) releases the store without
// the serving daemon's "store released" line.
func TestReleaseLineOnlyAtSignal(t *testing.T) {
	log := captureLog(t)
	storeDir := filepath.Join(t.TempDir(), "store")
	if err := store.Init(storeDir); err != nil {
		t.Fatal(err)
	}
	err := runMount(flag.NewFlagSet("mount", flag.ContinueOnError), []string{storeDir, filepath.Join(storeDir, "payload")}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "inside the store") {
		t.Fatalf("mount inside the store: %v, want refused", err)
	}
	if strings.Contains(log.String(), "store released") {
		t.Errorf("a refused mount logged the serving daemon's release:\n%s", log.String())
	}
	st, err := store.Open(storeDir, store.Options{})
	if err != nil {
		t.Fatalf("open after the refused mount: %v", err)
	}
	st.Close()
}
