//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/winfsp/cgofuse/fuse"

	"templatefs/leasefs"
)

// Name is the file system name the mount shows: the FUSE subtype on
// Linux, the file system name Explorer shows on Windows.
const Name = "templatefs"

// visibleWait bounds how long Mount waits on Windows for the drive to
// appear after Init (WinFsp calls Init before the drive letter is
// visible; rclone cmount waits the same, fuse-and-store-notes.md §G4).
const visibleWait = 10 * time.Second

// MountOptions tunes Mount. The zero value mounts for the calling user
// only, without debug output.
type MountOptions struct {
	// AllowOther lets other users access the mount (Linux allow_other;
	// needs root or user_allow_other in /etc/fuse.conf). Ignored on
	// Windows, where a drive belongs to the mounting user's logon session.
	AllowOther bool
	// Debug makes the FUSE layer log every request to stderr.
	Debug bool
	// OwnSignals (Linux) turns off cgofuse's own SIGINT and SIGTERM
	// handler, which detaches the mount lazily: the caller handles them
	// and decides when to unmount (cmd/templatefs serve, whose restart
	// must release the store only once the mount is detached, and must
	// not have a detach arrive late, when a new daemon may already be
	// mounted at the same path).
	OwnSignals bool
	// Observer, if set, is told of every callback, for metrics
	// (opcount.go).
	Observer Observer
}

// Mounted is a serving mount; Unmount ends it, Wait waits for its end.
type Mounted struct {
	host  *fuse.FileSystemHost
	fsys  *fileSystem
	mnt   string
	ended chan struct{} // closed when the FUSE loop has returned
	err   error         // why it returned; read after ended is closed
}

// args returns the FUSE command line options for opts. Linux: fsname and
// subtype; libfuse3 timeout options are not passed because cgofuse's init
// clears libfuse's config (docs/windows.md, "Timeouts"). Windows: files
// owned by the mounting user (uid=-1, gid=-1), the volume name, and zero
// file and directory info timeouts, since all but the immutable nodes
// change at any commit.
func args(opts MountOptions) []string {
	var o []string
	if runtime.GOOS == "windows" {
		o = append(o, "uid=-1", "gid=-1", "volname="+Name, "FileSystemName="+Name, "FileInfoTimeout=0", "DirInfoTimeout=0")
	} else {
		o = append(o, "fsname="+Name, "subtype="+Name)
		if opts.AllowOther {
			o = append(o, "allow_other")
		}
	}
	a := []string{"-o", strings.Join(o, ",")}
	if opts.Debug {
		a = append(a, "-d")
	}
	return a
}

// Mount mounts lfs at mountpoint (a directory; on Windows also a drive
// letter such as "T:") and serves it until Unmount. It returns once the
// FUSE layer has called Init (and, on Windows, the mount point is
// visible). The host reports leasefs inode numbers (use_ino), fills
// readdir with stats (readdir-plus), takes O_TRUNC in open and, on
// Windows, asks CheckRemove before deletes (DELETE_OK). Errors: ErrNoFUSE,
// ErrMount, or leasefs's error reading the root's attributes.
func Mount(mountpoint string, lfs *leasefs.FS, opts MountOptions) (*Mounted, error) {
	return mount(mountpoint, lfs, opts, nil, nil, nil)
}

// mount is Mount, counting Getattr, Getxattr and Listxattr callbacks in
// requests, getxattrs and listxattrs, each if set.
func mount(mountpoint string, lfs *leasefs.FS, opts MountOptions, requests, getxattrs, listxattrs *atomic.Int64) (*Mounted, error) {
	ready := make(chan struct{})
	fsys, err := newFileSystem(lfs, func() { close(ready) })
	if err != nil {
		return nil, fmt.Errorf("winfsp: mount %s: %w", mountpoint, err)
	}
	fsys.requests, fsys.getxattrs, fsys.listxattrs = requests, getxattrs, listxattrs
	var served fuse.FileSystemInterface = fsys
	if opts.Observer != nil {
		served = countedFileSystem{fsys, opts.Observer}
	}
	host := fuse.NewFileSystemHost(served)
	host.SetUseIno(true)
	host.SetCapReaddirPlus(true)
	host.SetCapOpenTrunc(true)
	host.SetCapDeleteAccess(true)
	m := &Mounted{host: host, fsys: fsys, mnt: mountpoint, ended: make(chan struct{})}
	go func() {
		defer close(m.ended)
		defer func() {
			if r := recover(); r != nil {
				m.err = fmt.Errorf("winfsp: mount %s: %v: %w", mountpoint, r, ErrNoFUSE)
			}
		}()
		if !host.Mount(mountpoint, args(opts)) {
			m.err = fmt.Errorf("winfsp: mount %s: the FUSE layer refused it (see its output above): %w", mountpoint, ErrMount)
		}
	}()
	select {
	case <-ready:
		if opts.OwnSignals {
			stopHostSignals(host)
		}
	case <-m.ended:
		if m.err == nil {
			return nil, fmt.Errorf("winfsp: mount %s: ended before it served: %w", mountpoint, ErrMount)
		}
		return nil, m.err
	}
	if runtime.GOOS == "windows" {
		if err := waitVisible(mountpoint); err != nil {
			m.Unmount()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-m.ended; cancel() }()
	go notifyChanges(ctx, host, lfs)
	return m, nil
}

// waitVisible polls until the mount point can be stat'ed.
func waitVisible(mnt string) error {
	deadline := time.Now().Add(visibleWait)
	for {
		_, err := os.Stat(mnt + string(os.PathSeparator))
		switch {
		case err == nil:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("winfsp: mount %s not visible after %v: %v: %w", mnt, visibleWait, err, ErrMount)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Unmount unmounts and waits until the FUSE loop has returned. Errors:
// ErrMount when the FUSE layer reports a failed unmount or the loop
// failed.
func (m *Mounted) Unmount() error {
	if !m.host.Unmount() {
		return fmt.Errorf("winfsp: unmount %s: %w", m.mnt, ErrMount)
	}
	return m.Wait()
}

// OpenFiles returns how many file handles of the mount are open: of
// payload files, and of all others.
func (m *Mounted) OpenFiles() (payload, other int) { return m.fsys.openFiles() }

// Wait blocks until the mount ends (Unmount, an external unmount, or on
// Linux SIGINT or SIGTERM, which cgofuse answers by unmounting) and
// returns the FUSE loop's error: ErrMount if it failed.
func (m *Mounted) Wait() error {
	<-m.ended
	return m.err
}
