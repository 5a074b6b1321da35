//go:build linux && fuse3

package harness

// Cgofuse is true when the tests are built with the fuse3 tag: the CLI is
// then built with it too, so daemons can serve with --backend cgofuse
// (libfuse3).
const Cgofuse = true
