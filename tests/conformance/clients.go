//go:build linux

package conformance

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// mountClient acts on the tree through the kernel, with the syscalls the
// tools of its methods' comments make.
type mountClient struct{ e *env }

func (m mountClient) read(rel string) (string, error) {
	b, err := os.ReadFile(m.e.path(rel))
	return string(b), err
}

func (m mountClient) write(rel, data string) error {
	f, err := os.OpenFile(m.e.path(rel), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	return errors.Join(err, f.Close())
}

func (m mountClient) create(rel string) error {
	fd, err := unix.Open(m.e.path(rel), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

func (m mountClient) list(rel string) ([]string, error) {
	entries, err := os.ReadDir(m.e.path(rel))
	var names []string
	for _, d := range entries {
		names = append(names, d.Name())
	}
	return names, err
}

func (m mountClient) stat(rel string) (string, uint32, uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(m.e.path(rel), &st); err != nil {
		return "", 0, 0, err
	}
	mode := fs.FileMode(st.Mode & 0o777)
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		mode |= fs.ModeDir
	}
	return mode.String(), uint32(st.Nlink), st.Ino, nil
}

func (m mountClient) remove(rel string) error { return unix.Unlink(m.e.path(rel)) }
func (m mountClient) rmdir(rel string) error  { return unix.Rmdir(m.e.path(rel)) }
func (m mountClient) mkdir(rel string) error  { return unix.Mkdir(m.e.path(rel), 0o755) }
func (m mountClient) chmod(rel string) error  { return unix.Chmod(m.e.path(rel), 0o600) }

func (m mountClient) rename(oldRel, newRel string) error {
	return unix.Rename(m.e.path(oldRel), m.e.path(newRel))
}

// lfsClient acts on leasefs directly, as the store owner, making the calls
// an adapter makes for the same syscalls.
type lfsClient struct {
	lfs *leasefs.FS
	c   leasefs.Caller
}

// newInProcess opens a fresh env's store without a mount and returns a
// client of its namespace; cleanup closes the store.
func newInProcess(t *testing.T) client {
	e := newStoreEnv(t)
	st, lfs := e.open()
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return lfsClient{lfs: lfs, c: leasefs.Caller{UID: uint32(os.Geteuid()), PID: os.Getpid()}}
}

// parent walks to the directory of rel and returns it with rel's name.
func (l lfsClient) parent(rel string) (leasefs.Node, string, error) {
	dir, name := path.Split(rel)
	if dir = path.Clean(dir); dir == "" {
		dir = "."
	}
	n, err := l.lfs.Walk(dir)
	return n, name, err
}

func (l lfsClient) read(rel string) (string, error) {
	n, err := l.lfs.Walk(rel)
	if err != nil {
		return "", err
	}
	h, err := l.lfs.Open(n, leasefs.OpenFlags{}, l.c)
	switch {
	case err != nil:
		return "", err
	case h.File != nil:
		defer h.File.Close()
		b, err := io.ReadAll(h.File)
		return string(b), err
	case h.Snapshot != nil:
		defer h.Snapshot.Close()
		b, err := io.ReadAll(h.Snapshot)
		return string(b), err
	case h.Events != nil:
		h.Events.Close()
		return "", errors.New("read of an event stream: it never ends")
	}
	return string(h.Data), nil
}

func (l lfsClient) write(rel, data string) error {
	n, err := l.lfs.Walk(rel)
	if err != nil {
		return err
	}
	h, err := l.lfs.Open(n, leasefs.OpenFlags{Write: true, Truncate: true}, l.c)
	if err != nil {
		return err
	}
	if h.Commands == nil {
		return errors.New("open for writing without a command stream")
	}
	_, err = h.Commands.Write([]byte(data), l.c)
	return errors.Join(err, h.Commands.Flush())
}

func (l lfsClient) create(rel string) error {
	dir, name, err := l.parent(rel)
	if err != nil {
		return err
	}
	cr, err := l.lfs.Create(dir, name, leasefs.OpenFlags{Write: true, Exclusive: true}, l.c)
	switch h := cr.Handle; {
	case err != nil:
		return err
	case h.Commands != nil:
		return h.Commands.Flush() // the close: it waits for the create's commit
	case h.Incoming != nil:
		err := h.Incoming.File.Close()
		h.Incoming.Released()
		return err
	}
	return nil
}

func (l lfsClient) list(rel string) ([]string, error) {
	n, err := l.lfs.Walk(rel)
	if err != nil {
		return nil, err
	}
	entries, err := l.lfs.ReadDir(n)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return names, err
}

func (l lfsClient) stat(rel string) (string, uint32, uint64, error) {
	n, err := l.lfs.Walk(rel)
	if err != nil {
		return "", 0, 0, err
	}
	a, err := l.lfs.Attr(n)
	return a.Mode.String(), a.Nlink, a.Ino, err
}

func (l lfsClient) remove(rel string) error {
	dir, name, err := l.parent(rel)
	if err != nil {
		return err
	}
	return l.lfs.Remove(dir, name, l.c)
}

func (l lfsClient) rmdir(rel string) error {
	dir, name, err := l.parent(rel)
	if err != nil {
		return err
	}
	return l.lfs.Rmdir(dir, name, l.c)
}

func (l lfsClient) mkdir(rel string) error {
	dir, name, err := l.parent(rel)
	if err != nil {
		return err
	}
	_, err = l.lfs.Mkdir(dir, name, l.c)
	return err
}

func (l lfsClient) rename(oldRel, newRel string) error {
	oldDir, oldName, err := l.parent(oldRel)
	if err != nil {
		return err
	}
	newDir, newName, err := l.parent(newRel)
	if err != nil {
		return err
	}
	return l.lfs.Rename(oldDir, oldName, newDir, newName, 0, l.c)
}

func (l lfsClient) chmod(rel string) error {
	n, err := l.lfs.Walk(rel)
	if err != nil {
		return err
	}
	return l.lfs.SetAttr(n, leasefs.ChangeMode, l.c)
}
