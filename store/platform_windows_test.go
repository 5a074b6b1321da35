package store_test

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// diedAtFailpoint reports whether err, from running a child, says the
// child ended with exit code 137, as a fail point terminates it on
// Windows (platform_windows.go killedExitCode).
func diedAtFailpoint(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 137
}

// checkMemoryCopy checks that the published memory.bin at path is size
// bytes long. Windows copies are dense (openvmm-snapshot-format.md §1),
// so dataBytes bounds nothing here.
func checkMemoryCopy(t *testing.T, path string, size, _ int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("%s: size %d, want %d", path, fi.Size(), size)
	}
}
