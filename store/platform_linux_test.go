package store_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// diedAtFailpoint reports whether err, from running a child, says the
// child was killed by SIGKILL, as a fail point kills it on Linux.
func diedAtFailpoint(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
}

// checkMemoryCopy checks that the published memory.bin at path is size
// bytes long and sparse: no more than twice its dataBytes of data are
// allocated (st_blocks, 512-byte units).
func checkMemoryCopy(t *testing.T, path string, size, dataBytes int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	dataBlocks := dataBytes / 512
	if st.Size != size || st.Blocks > 2*dataBlocks {
		t.Errorf("%s: size %d, %d blocks; want size %d and about %d blocks (sparse)", filepath.Base(path), st.Size, st.Blocks, size, dataBlocks)
	}
}
