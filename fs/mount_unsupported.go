//go:build !linux

// Package fs mounts the templatefs namespace with go-fuse on Linux only;
// on other systems it is empty and the winfsp package (cgofuse) serves
// the mount.
package fs
