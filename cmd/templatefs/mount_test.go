//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckMountpoint: a file, a directory inside the store and a missing
// path are refused before any mount(2); a plain directory passes.
func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	file := filepath.Join(dir, "file")
	for _, p := range []string{storeDir, filepath.Join(storeDir, "payload"), filepath.Join(dir, "mnt")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mnt, want string
	}{
		{file, "not a directory"},
		{filepath.Join(storeDir, "payload"), "inside the store"},
		{storeDir, "inside the store"},
		{filepath.Join(dir, "missing"), "no such file"},
		{filepath.Join(dir, "mnt"), ""},
		{"/proc", "already has a file system mounted"},
	}
	// store.Open resolves links above the store; a mountpoint reached
	// through one is still seen inside it.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct{ mnt, want string }{filepath.Join(link, "store", "payload"), "inside the store"})
	for _, tt := range tests {
		err := checkMountpoint(tt.mnt, storeDir)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkMountpoint(%s): %v, want %q", tt.mnt, err, tt.want)
		}
	}
}
