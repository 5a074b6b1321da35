//go:build fuse3

package harness

// CgofuseBuilt is set when the tests are built with -tags fuse3: Binary
// then builds templatefs with the cgofuse backend too (--backend cgofuse).
const CgofuseBuilt = true
