//go:build linux && !fuse3

package harness

// Cgofuse is false without the fuse3 tag: the CLI has only go-fuse.
const Cgofuse = false
