//go:build !fuse3

package harness

// CgofuseBuilt is set when the tests are built with -tags fuse3.
const CgofuseBuilt = false
