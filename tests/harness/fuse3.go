//go:build linux && fuse3

package harness

// fuse3Enabled is true when the tests are built with -tags fuse3; the CLI
// is then built with it too, so daemons can serve with --backend cgofuse.
const fuse3Enabled = true
