//go:build linux && !fuse3

package harness

// fuse3Enabled is false: the CLI is built without the cgofuse backend.
const fuse3Enabled = false
