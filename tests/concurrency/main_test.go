//go:build linux

package concurrency

import (
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/tests/harness"
)

// envOpen, set in the environment of this test binary, makes it an
// opener (OpBind) instead of running tests: it opens the file the value
// names, prints mountResult of the open, and if the open succeeded holds
// the file open until its stdin ends (its test closes it, exits or is
// killed).
const envOpen = "TEMPLATEFS_CONCURRENCY_OPEN"

func TestMain(m *testing.M) {
	if path := os.Getenv(envOpen); path != "" {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		fmt.Println(mountResult(err))
		if err != nil {
			os.Exit(1)
		}
		io.Copy(io.Discard, os.Stdin)
		unix.Close(fd)
		os.Exit(0)
	}
	harness.Main(m)
}
