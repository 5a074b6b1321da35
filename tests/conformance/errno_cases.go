//go:build linux

package conformance

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// testErrnos checks the errnos of calls the tree has no use for:
// fallocate(1) of a lease (EOPNOTSUPP, from leasefs on go-fuse and from
// the kernel on cgofuse) and of a new name (EPERM, the create), fsync(2)
// of every kind of open file (nothing to sync: success), and every
// errno docs/errno.md lists as answered without a leasefs error.
func testErrnos(t *testing.T, b Backend) {
	e := newEnv(t, b)
	before := e.read("leases/c1")
	out, err := exec.Command("fallocate", "-l", "1M", e.path("leases/c1")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Operation not supported") {
		t.Errorf("fallocate -l 1M leases/c1: %v: %s; want Operation not supported", err, out)
	}
	if after := e.read("leases/c1"); after != before {
		t.Errorf("fallocate changed the lease:\n%s\nwas\n%s", after, before)
	}
	if logged := strings.Contains(e.log.String(), "op=fallocate"); logged == b.NoFallocate {
		t.Errorf("fallocate refusal logged: %v, want %v:\n%s", logged, !b.NoFallocate, e.log.String())
	}
	out, err = exec.Command("fallocate", "-l", "1M", e.path("leases/x")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Operation not permitted") {
		t.Errorf("fallocate -l 1M leases/x: %v: %s; want Operation not permitted", err, out)
	}
	e.wantGone("leases/x")

	for _, o := range []struct {
		rel  string
		flag int
	}{
		{"leases/c1", unix.O_WRONLY}, {"generations/g000001/ctl", unix.O_RDWR}, {"generations/g000001/status", unix.O_RDONLY},
		{"generations/g000001/payload/state.bin", unix.O_RDONLY}, {"store.db", unix.O_RDONLY},
	} {
		fd, err := unix.Open(e.path(o.rel), o.flag|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fsync(fd); err != nil {
			t.Errorf("fsync %s: %v", o.rel, err)
		}
		unix.Close(fd)
	}

	// One call per errno of leasefs.OtherErrnos, each returning its errno.
	withFd := func(rel string, flag int, call func(fd int) error) func() error {
		return func() error {
			fd, err := unix.Open(e.path(rel), flag|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return call(fd)
		}
	}
	other, err := os.Create(t.TempDir() + "/copy")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	calls := map[string]func() error{
		"EBADF":  withFd("generations/g000001/status", unix.O_RDONLY, func(fd int) error { return unix.Fallocate(fd, 0, 0, 4096) }),
		"EINVAL": withFd("generations/g000001/status", unix.O_RDONLY, func(fd int) error { return unix.Ftruncate(fd, 0) }),
		"ENODEV": withFd("generations/g000001/status", unix.O_RDONLY, func(fd int) error {
			m, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				return err
			}
			unix.Munmap(m)
			if b.MappableText {
				return unix.ENODEV // as documented: this backend maps texts
			}
			return nil
		}),
		"EACCES": withFd("leases/c1", unix.O_WRONLY, func(fd int) error {
			_, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
			return err
		}),
		"ENOTTY": withFd("generations/g000001/payload/state.bin", unix.O_RDONLY, func(fd int) error {
			_, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
			return err
		}),
		"EXDEV": withFd("generations/g000001/payload/state.bin", unix.O_RDONLY, func(fd int) error {
			_, err := unix.CopyFileRange(fd, nil, int(other.Fd()), nil, 4096, 0)
			return err
		}),
		"ESPIPE": withFd("events", unix.O_RDONLY, func(fd int) error {
			_, err := unix.Seek(fd, 0, unix.SEEK_SET)
			return err
		}),
		"EOPNOTSUPP": func() error {
			fd, err := unix.Open(e.path("leases"), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		},
	}
	for _, o := range leasefs.OtherErrnos() {
		call, ok := calls[o.Name]
		if !ok {
			t.Errorf("%s (%s) has no call here", o.Name, o.When)
			continue
		}
		if err := call(); unix.ErrnoName(errnoOf(err)) != o.Name && !(o.Name == "EOPNOTSUPP" && errnoOf(err) == unix.EOPNOTSUPP) {
			t.Errorf("%s: got %v (%s)", o.Name, err, o.When)
		}
	}
}

// errnoOf returns the errno err carries, or 0.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	errors.As(err, &errno)
	return errno
}
