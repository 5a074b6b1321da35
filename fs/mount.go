//go:build linux

// Package fs mounts the templatefs namespace (package leasefs) with
// go-fuse on Linux. It is a thin adapter: each go-fuse node holds one
// leasefs.Node, each operation calls one leasefs.FS method and maps the
// error by name (errno.go). It never touches the store directly.
package fs

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// Names the mount shows in /proc/mounts and df: source "templatefs",
// type "fuse.templatefs".
const (
	FsName = "templatefs"
	Name   = "templatefs"
)

// maxIO is the largest READ the kernel sends: 1 MiB, the kernel's limit
// since Linux 4.20 (fuse-and-store-notes.md §A6); go-fuse defaults to 128 KiB.
const maxIO = 1 << 20

// MountOptions tunes Mount. The zero value mounts for the calling user
// only, without debug output, logging to slog.Default().
type MountOptions struct {
	// AllowOther lets other users access the mount (FUSE allow_other;
	// needs root or user_allow_other in /etc/fuse.conf).
	AllowOther bool
	// Debug logs every FUSE request and reply, at info level.
	Debug bool
	// Logger receives debug and diagnostic lines; nil means slog.Default().
	// Refusals are logged by leasefs to its own logger.
	Logger *slog.Logger
	// NoPassthrough turns FUSE passthrough off: payload reads then reach
	// the daemon, which serves them from the backing file descriptor
	// (splice). For comparison and for kernels where passthrough misbehaves.
	NoPassthrough bool
	// OpenFiles, if set, counts the mount's open file handles, so a
	// stopping daemon can say what it still serves and when nothing is
	// left (cmd/templatefs serve).
	OpenFiles *OpenFiles
	// Coherence, if set, is the mount's: the daemon runs the commands of
	// its CLI channel through Coherence.Do, so the kernel learns of their
	// changes before the client's reply. Nil: the mount makes its own.
	Coherence *Coherence
	// Observer, if set, is told of every request and of the payload read
	// mode, for metrics (opcount.go).
	Observer Observer
}

// OpenFiles counts the open file handles of a mount: payload files
// (their backing files) and all others (rendered texts, index snapshots,
// command files). Safe for concurrent use; the zero value counts from 0.
type OpenFiles struct {
	payload, other atomic.Int64
}

// Payload returns how many payload file handles are open.
func (o *OpenFiles) Payload() int64 { return o.payload.Load() }

// Other returns how many other file handles are open.
func (o *OpenFiles) Other() int64 { return o.other.Load() }

// counter returns the count a handle of a payload (or of another file)
// adds to, nil when o is nil.
func (o *OpenFiles) counter(payload bool) *atomic.Int64 {
	switch {
	case o == nil:
		return nil
	case payload:
		return &o.payload
	}
	return &o.other
}

// ReadMode names how payload reads are served: ReadPassthrough when the
// kernel reads the backing file itself (FUSE passthrough, Linux >= 6.9 with
// CAP_SYS_ADMIN, fuse-and-store-notes.md §A1), ReadBackingFd when each READ
// reaches the daemon, which answers from the backing file descriptor.
const (
	ReadPassthrough = "passthrough"
	ReadBackingFd   = "backing-fd"
)

// negativeTimeout is CacheTimeout, addressable for fusefs.Options.
var negativeTimeout = CacheTimeout

// Mount mounts lfs at mountpoint and serves it until the returned server
// is unmounted (server.Unmount, then server.Wait). As root it calls
// mount(2) directly (go-fuse DirectMount), falling back to fusermount3
// otherwise; the root directory has inode number leasefs.InoRoot. Errors:
// the mount error from go-fuse.
func Mount(mountpoint string, lfs *leasefs.FS, opts MountOptions) (*fuse.Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	coherence := opts.Coherence
	if coherence == nil {
		coherence = &Coherence{}
	}
	root := &node{lfs: lfs, ln: lfs.Root(), noPassthrough: opts.NoPassthrough, open: opts.OpenFiles, coherence: coherence}
	var disabled uint64
	if opts.NoPassthrough {
		disabled = fuse.CAP_PASSTHROUGH
	}
	server, err := mountRaw(mountpoint, root, opts.Observer, &fusefs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:  opts.AllowOther,
			Debug:       opts.Debug,
			Logger:      slog.NewLogLogger(log.Handler(), slog.LevelInfo),
			FsName:      FsName,
			Name:        Name,
			DirectMount: os.Geteuid() == 0,
			MaxWrite:    maxIO,

			DisabledCapabilities: disabled,
			// The kernel decides per listing whether to ask for
			// READDIRPLUS: for the first chunk, and then only while its
			// caller stats the entries (ls -l), so a listing without stats
			// (ls -f, find -name, a backup's walk) makes the daemon keep
			// no inode per lease (issue 10: RssAnon at 1M leases).
			ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO,
		},
		RootStableAttr:  &fusefs.StableAttr{Ino: leasefs.InoRoot},
		NegativeTimeout: &negativeTimeout, // where names are fixed only: see node.Lookup
		NullPermissions: true,             // leasefs sets every mode; 0 would be a bug to see, not to paper over
		Logger:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	coherence.attach(ctx, lfs, root.EmbeddedInode())
	go func() { server.Wait(); cancel() }()
	mode, why := readMode(server.KernelSettings().Flags64(), opts.NoPassthrough, hasSysAdmin())
	log.Info("payload read mode", "mode", mode, "why", why, "mountpoint", mountpoint)
	if opts.Observer != nil {
		opts.Observer.Passthrough(mode == ReadPassthrough)
	}
	return server, nil
}

// mountRaw is go-fuse's fs.Mount, serving through countedFS when obs is
// set.
func mountRaw(mountpoint string, root fusefs.InodeEmbedder, obs Observer, opts *fusefs.Options) (*fuse.Server, error) {
	raw := fusefs.NewNodeFS(root, opts)
	if obs != nil {
		raw = countedFS{raw, obs}
	}
	server, err := fuse.NewServer(raw, mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err // as fs.Mount: the serve loop ends with the failed mount
	}
	return server, nil
}

// readMode decides the payload read mode from the kernel's INIT flags, the
// option and the daemon's capability, and says why. Passthrough needs all
// three; the kernel may still refuse a backing file at open, and go-fuse
// then serves that open with reads (fs/bridge.go), so ReadPassthrough is
// the mode the mount asks for.
func readMode(kernelFlags uint64, noPassthrough, sysAdmin bool) (mode, why string) {
	switch {
	case noPassthrough:
		return ReadBackingFd, "turned off by the no-passthrough option"
	case kernelFlags&fuse.CAP_PASSTHROUGH == 0:
		return ReadBackingFd, "the kernel does not offer FUSE passthrough (Linux >= 6.9)"
	case !sysAdmin:
		return ReadBackingFd, "the daemon lacks CAP_SYS_ADMIN, which FUSE passthrough needs"
	}
	return ReadPassthrough, "the kernel offers FUSE passthrough and the daemon has CAP_SYS_ADMIN"
}

// hasSysAdmin reports whether CAP_SYS_ADMIN is in the effective set.
func hasSysAdmin() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_SYS_ADMIN/32].Effective&(1<<(unix.CAP_SYS_ADMIN%32)) != 0
}
