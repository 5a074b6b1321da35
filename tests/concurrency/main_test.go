//go:build linux

package concurrency

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/tests/harness"
)

// envOpen, set in the environment of this test binary, makes it an
// opener (OpSpawn, OpBind) instead of running tests: once it reads a line
// on stdin it opens the file the value names, prints mountResult of the
// open, and if the open succeeded holds the file open until its stdin
// ends (its test closes it, exits or is killed).
const envOpen = "TEMPLATEFS_CONCURRENCY_OPEN"

func TestMain(m *testing.M) {
	if path := os.Getenv(envOpen); path != "" {
		in := bufio.NewReader(os.Stdin)
		if _, err := in.ReadString('\n'); err != nil {
			os.Exit(2)
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		fmt.Println(mountResult(err))
		if err != nil {
			os.Exit(1)
		}
		io.Copy(io.Discard, in)
		unix.Close(fd)
		os.Exit(0)
	}
	harness.Main(m)
}
