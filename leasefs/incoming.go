package leasefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"templatefs/store"
)

// Incoming directories (project issue 9 §4): publication through the
// mount for orchestrators that only do file I/O.
//
//	incoming/                      mkdir <name> makes a staging directory
//	incoming/<name>/               the capture's files, plus ctl and status
//	incoming/<name>/<file>         manifest.bin, state.bin, memory.bin, scratch.img, class.json
//	incoming/<name>/ctl            write `publish`
//	incoming/<name>/status         cat: open | published <gen> | refused <errno>: <reason>
//
// Each incoming directory is store.IncomingPath(<name>): its files are
// real files on the store's disk (class.json in the directory, the others
// in its capture/ subdirectory), which the adapters read and write
// directly (Handle.Incoming). Policy is here: only the store owner and
// root may do anything but list them; file names are clone IDs (1 to 128
// bytes of [A-Za-z0-9._-], not starting with . or -) other than ctl and
// status; files may be created, written, truncated, fsynced, renamed
// within their directory and removed; there are no subdirectories, links
// or special files. A publication is refused (ErrIncomingBusy) while a file
// of the directory is open for writing, and while it runs no file of the
// directory can be opened for writing, created, renamed or removed, so no
// descriptor can change a payload after it was hashed; nor can its ctl file
// be opened for writing, so a second `publish` fails at once (the kernel
// holds a file's lock through a write(2), so a write would wait for the
// first to end). Once published, a directory refuses `publish`
// (ErrIncomingPublished) and its status keeps naming the generation until
// it is removed or the daemon restarts (this state is in memory only; a
// published directory is empty, so a restarted daemon refuses its
// `publish` as a bad capture).

// Fixed names of an incoming directory.
const (
	incomingCtl    = "ctl"
	incomingStatus = "status"
	// InoIncoming is the inode number of incoming/.
	InoIncoming = 9
)

// incomingCtlText is what cat shows of an incoming ctl file.
var incomingCtlText = []byte("publish\n")

// Inode classes of incoming nodes: the object number is the backing
// directory's or file's own inode number (stable while it exists).
const (
	inoClassIncomingDir    = 0x30
	inoClassIncomingFile   = 0x31
	inoClassIncomingCtl    = 0x32
	inoClassIncomingStatus = 0x33
)

// ErrIncomingBusy is returned by a publication while a file of the
// incoming directory is open for writing or a publication of it runs, and
// by a write-open (of ctl too), create, rename or unlink in it while it is
// being published.
var ErrIncomingBusy = errors.New("incoming directory is busy")

// ErrIncomingPublished is returned by `publish` of an incoming directory
// this daemon has published already.
var ErrIncomingPublished = errors.New("incoming directory already published")

// incoming is the FS's in-memory state of incoming directories: open
// writers, publications running, publications done, and each one's last
// outcome (status).
type incoming struct {
	mu         sync.Mutex
	writers    map[string]int                // open-for-writing handles per directory
	publishing map[string]bool               // a publication is running
	published  map[string]store.GenerationID // published, until rmdir
	outcome    map[string]string             // status text after `publish`; "open" when none
}

// IncomingFile is an open file of an incoming directory: the backing file
// itself, which the adapter reads and writes directly (passthrough where
// the kernel allows). The adapter owns File and closes it; it calls
// Released once when the handle goes away.
type IncomingFile struct {
	File *os.File
	f    *FS
	dir  string
	// Append is set for an O_APPEND open: the descriptor writes at the
	// end whatever the offset (os.File.WriteAt refuses it; use Write).
	Append bool
	// write is set for an open for writing, counted until Released.
	write bool
	once  sync.Once
}

// Released ends the handle's count as a writer of its directory.
func (h *IncomingFile) Released() {
	h.once.Do(func() {
		if !h.write {
			return
		}
		in := &h.f.incoming
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.writers[h.dir]--; in.writers[h.dir] <= 0 {
			delete(in.writers, h.dir)
		}
	})
}

// IsIncoming reports whether n is below incoming/ (incoming/ itself
// excluded): the nodes whose setattr SetIncomingAttr answers.
func (n Node) IsIncoming() bool {
	o := n.kind.facts().object
	return o == objIncomingDir || o == objIncomingFile
}

// incomingDirName is the name of the incoming directory n is or is in.
func (n Node) incomingDirName() string {
	dir, _, _ := strings.Cut(n.name, "/")
	return dir
}

// validIncomingFile checks a file name of an incoming directory.
func validIncomingFile(name string) error {
	if name == incomingCtl || name == incomingStatus {
		return fmt.Errorf("%q is the incoming directory's own: %w", name, ErrExist)
	}
	if err := store.ValidateCloneID(name); err != nil {
		return fmt.Errorf("incoming file name: %w", err)
	}
	return nil
}

// incomingFilePath is where file name of incoming directory dir lives.
func incomingFilePath(dir, name string) string {
	if name == store.IncomingClassFile {
		return filepath.Join(dir, name)
	}
	return filepath.Join(dir, store.IncomingCaptureDir, name)
}

func (f *FS) lookupIncomingDir(name string) (Node, error) {
	dir, err := f.st.IncomingPath(name)
	if err != nil {
		return Node{}, fmt.Errorf("incoming %q: %w", name, store.ErrNotFound)
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) || err == nil && !fi.IsDir() {
		return Node{}, fmt.Errorf("no incoming directory %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return Node{}, err
	}
	ino, err := backingIno(dir, fi)
	if err != nil {
		return Node{}, err
	}
	return objectNode(KindIncomingEntryDir, ino, name)
}

// lookupIncomingFile resolves name in incoming directory dir.
func (f *FS) lookupIncomingFile(dir Node, name string) (Node, error) {
	d, err := f.lookupIncomingDir(dir.name)
	if err != nil {
		return Node{}, err
	}
	switch name {
	case incomingCtl:
		return Node{kind: KindIncomingCtlFile, num: d.num, name: d.name}, nil
	case incomingStatus:
		return Node{kind: KindIncomingStatusFile, num: d.num, name: d.name}, nil
	}
	if validIncomingFile(name) != nil {
		return Node{}, notFound(dir, name)
	}
	path := incomingFilePath(f.incomingDir(dir.name), name)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Node{}, notFound(dir, name)
	case err != nil:
		return Node{}, err
	case !fi.Mode().IsRegular() || fi.IsDir():
		return Node{}, notFound(dir, name)
	}
	ino, err := backingIno(path, fi)
	if err != nil {
		return Node{}, err
	}
	return objectNode(KindIncomingFile, ino, dir.name+"/"+name)
}

// incomingDir is the backing path of incoming directory name (valid).
func (f *FS) incomingDir(name string) string {
	p, _ := f.st.IncomingPath(name)
	return p
}

// incomingPath returns the backing path of incoming file n: its name if
// the file there is still n's inode, else the name it was renamed to.
func (f *FS) incomingPath(n Node) (string, error) {
	dir, name, _ := strings.Cut(n.name, "/")
	p := incomingFilePath(f.incomingDir(dir), name)
	if fi, err := os.Lstat(p); err == nil {
		if ino, _ := backingIno(p, fi); ino == n.num {
			return p, nil
		}
	}
	names, err := f.incomingFiles(dir)
	if err != nil {
		return "", err
	}
	for _, e := range names {
		if e.Node.num == n.num {
			return incomingFilePath(f.incomingDir(dir), e.Name), nil
		}
	}
	return "", fmt.Errorf("%s: gone: %w", n, store.ErrNotFound)
}

// incomingFiles lists the files of incoming directory name, sorted.
func (f *FS) incomingFiles(name string) ([]DirEntry, error) {
	dir := f.incomingDir(name)
	var out []DirEntry
	for _, d := range []string{dir, filepath.Join(dir, store.IncomingCaptureDir)} {
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			inRoot := d == dir
			if !e.Type().IsRegular() || validIncomingFile(e.Name()) != nil || inRoot != (e.Name() == store.IncomingClassFile) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			ino, err := backingIno(filepath.Join(d, e.Name()), fi)
			if err != nil {
				return nil, err
			}
			n, err := objectNode(KindIncomingFile, ino, name+"/"+e.Name())
			if err != nil {
				return nil, err
			}
			out = append(out, DirEntry{Name: e.Name(), Node: n})
		}
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// readIncoming lists incoming/ or an incoming directory.
func (f *FS) readIncoming(dir Node) ([]DirEntry, error) {
	if dir.kind == KindIncomingDir {
		names, err := f.st.IncomingNames()
		if err != nil {
			return nil, err
		}
		var out []DirEntry
		for _, name := range names {
			n, err := f.lookupIncomingDir(name)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, DirEntry{Name: name, Node: n})
		}
		return out, nil
	}
	d, err := f.lookupIncomingDir(dir.name)
	if err != nil {
		return nil, err
	}
	files, err := f.incomingFiles(dir.name)
	if err != nil {
		return nil, err
	}
	out := []DirEntry{
		{Name: incomingCtl, Node: Node{kind: KindIncomingCtlFile, num: d.num, name: d.name}},
		{Name: incomingStatus, Node: Node{kind: KindIncomingStatusFile, num: d.num, name: d.name}},
	}
	return append(out, files...), nil
}

// incomingView is the render of an incoming directory and its ctl and
// status files: the backing directory's mtime, and their texts.
func (f *FS) incomingView(n Node) (view, error) {
	d, err := f.lookupIncomingDir(n.name)
	if err == nil && d.num != n.num {
		err = fmt.Errorf("%s: replaced: %w", n, store.ErrNotFound)
	}
	if err != nil {
		return view{}, err
	}
	fi, err := lstatIncoming(n, f.incomingDir(n.name))
	if err != nil {
		return view{}, err
	}
	v := at(fi.ModTime())
	switch n.kind {
	case KindIncomingCtlFile:
		v.text = incomingCtlText
	case KindIncomingStatusFile:
		v.text = f.incomingStatusText(n.name)
	}
	return v, nil
}

// incomingFileAttr is the stat of an incoming file: its backing file's
// size, blocks and mtime.
func (f *FS) incomingFileAttr(n Node, a Attr) (Attr, error) {
	path, err := f.incomingPath(n)
	if err != nil {
		return Attr{}, err
	}
	fi, err := lstatIncoming(n, path)
	if err != nil {
		return Attr{}, err
	}
	a.setTimes(fi.ModTime(), fi.ModTime())
	a.Size = fi.Size()
	a.Blocks, a.Blksize = allocated(fi)
	return a, nil
}

// lstatIncoming stats the backing path of n; a missing one is
// store.ErrNotFound.
func lstatIncoming(n Node, path string) (os.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("%s: %w", n, store.ErrNotFound)
	}
	return fi, err
}

// incomingStatusText is what cat shows of incoming/<name>/status.
func (f *FS) incomingStatusText(name string) []byte {
	in := &f.incoming
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.publishing[name]:
		return []byte("publishing\n")
	case in.outcome[name] != "":
		return []byte(in.outcome[name])
	}
	return []byte("open\n")
}

// openIncoming opens incoming file n (OpenFlags as Open) for c: only
// owners, and for writing not while the directory is published.
func (f *FS) openIncoming(n Node, fl OpenFlags, c Caller) (Handle, error) {
	if err := f.authorize(c, "open "+n.String()); err != nil {
		return Handle{}, err
	}
	path, err := f.incomingPath(n)
	if err != nil {
		return Handle{}, err
	}
	h, err := f.openIncomingPath(n.incomingDirName(), path, fl, 0)
	return Handle{Incoming: h}, err
}

// openIncomingPath opens backing file path of incoming directory dir with
// extra flags (os.O_CREATE, os.O_EXCL), counting a writer.
func (f *FS) openIncomingPath(dir, path string, fl OpenFlags, extra int) (*IncomingFile, error) {
	flags := os.O_RDONLY | openNoFollow | extra
	if fl.Write || fl.Truncate || extra != 0 {
		flags = os.O_RDWR | openNoFollow | extra
	}
	if fl.Truncate {
		flags |= os.O_TRUNC
	}
	if fl.Append {
		flags |= os.O_APPEND
	}
	h := &IncomingFile{f: f, dir: dir, write: flags&os.O_RDWR != 0, Append: fl.Append}
	if h.write {
		if err := f.incomingWriter(dir); err != nil {
			return nil, err
		}
	}
	file, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		h.Released()
		if errors.Is(err, os.ErrExist) {
			err = fmt.Errorf("%s: %w", path, ErrExist)
		} else if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%s: %w", path, store.ErrNotFound)
		}
		return nil, err
	}
	h.File = file
	return h, nil
}

// openIncomingCtl is the check of an open of incoming ctl file n for
// writing: refused while its directory is being published.
func (f *FS) openIncomingCtl(n Node) error {
	in := &f.incoming
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.publishing[n.name] {
		return fmt.Errorf("open %s for writing: incoming %s is being published: %w", n, n.name, ErrIncomingBusy)
	}
	return nil
}

// incomingWriter counts a new writer of dir, refused while it is being
// published.
func (f *FS) incomingWriter(dir string) error {
	in := &f.incoming
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.publishing[dir] {
		return fmt.Errorf("incoming %s is being published: %w", dir, ErrIncomingBusy)
	}
	if in.writers == nil {
		in.writers = map[string]int{}
	}
	in.writers[dir]++
	return nil
}

// incomingChange runs fn, a change of dir's files, unless dir is being
// published (ErrIncomingBusy).
func (f *FS) incomingChange(dir string, fn func() error) error {
	in := &f.incoming
	in.mu.Lock()
	busy := in.publishing[dir]
	in.mu.Unlock()
	if busy {
		return fmt.Errorf("incoming %s is being published: %w", dir, ErrIncomingBusy)
	}
	return fn()
}

// createIncoming creates (or with !excl opens) file name in incoming
// directory dir, open for reading and writing.
func (f *FS) createIncoming(dir Node, name string, excl bool) (Created, error) {
	if err := validIncomingFile(name); err != nil {
		return Created{}, err
	}
	if _, err := f.lookupIncomingDir(dir.name); err != nil {
		return Created{}, err
	}
	extra := os.O_CREATE
	if excl {
		extra |= os.O_EXCL
	}
	path := incomingFilePath(f.incomingDir(dir.name), name)
	h, err := f.openIncomingPath(dir.name, path, OpenFlags{Write: true}, extra)
	if err != nil {
		return Created{}, err
	}
	n, err := f.lookupIncomingFile(dir, name)
	var a Attr
	if err == nil {
		a, err = f.Attr(n)
	}
	if err != nil {
		h.File.Close()
		h.Released()
		return Created{}, err
	}
	return Created{Node: n, Attr: a, Handle: Handle{Incoming: h}}, nil
}

// removeIncoming unlinks file name of incoming directory dir. ctl and
// status are not files of the capture: unlinking them succeeds and
// changes nothing, so `rm -r` of an incoming directory works.
func (f *FS) removeIncoming(dir Node, name string) error {
	n, err := f.lookupIncomingFile(dir, name)
	if err != nil || n.kind != KindIncomingFile {
		return err
	}
	return f.incomingChange(dir.name, func() error {
		path, err := f.incomingPath(n)
		if err == nil {
			err = os.Remove(path)
		}
		return err
	})
}

// renameIncoming renames a file within one incoming directory.
func (f *FS) renameIncoming(oldDir Node, oldName string, newDir Node, newName string, flags RenameFlags) error {
	src, err := f.lookupIncomingFile(oldDir, oldName)
	if err != nil {
		return err
	}
	switch {
	case src.kind != KindIncomingFile || newDir.kind != KindIncomingEntryDir || newDir.name != oldDir.name || flags&^RenameNoReplace != 0:
		return fmt.Errorf("rename %q in %s to %q in %s: only files, within their incoming directory: %w", oldName, oldDir, newName, newDir, ErrNotPermitted)
	}
	if err := validIncomingFile(newName); err != nil {
		if errors.Is(err, ErrExist) {
			return fmt.Errorf("rename onto %q: %w", newName, ErrNotPermitted)
		}
		return err
	}
	return f.incomingChange(oldDir.name, func() error {
		from, err := f.incomingPath(src)
		if err != nil {
			return err
		}
		to := incomingFilePath(f.incomingDir(newDir.name), newName)
		if flags&RenameNoReplace != 0 {
			if _, err := os.Lstat(to); err == nil {
				return fmt.Errorf("rename onto %q: %w", newName, ErrExist)
			}
		}
		return os.Rename(from, to)
	})
}

// SetIncomingAttr applies a setattr to incoming file n for c: a size
// truncates the backing file (size >= 0 when ch has ChangeSize), times
// set its atime and mtime (a zero time leaves one unchanged); a change of
// mode or owner is accepted and ignored (the backing file stays 0600, the
// store owner's: cp -p must not fail). The ctl file takes a size or times
// change as a no-op (the truncate of `echo publish > ctl`), the
// directory and status file times; anything else is ErrNotPermitted. Errors: ErrAccess, ErrIncomingBusy
// during a publication, store.ErrNotFound, the system error.
func (f *FS) SetIncomingAttr(n Node, ch AttrChange, size int64, atime, mtime time.Time, c Caller) error {
	if err := f.enter("setattr"); err != nil {
		return err
	}
	defer f.leave()
	if err := f.authorize(c, "setattr "+n.String()); err != nil {
		return err
	}
	if n.kind != KindIncomingFile {
		allowed := ChangeTimes
		if n.kind == KindIncomingCtlFile {
			allowed |= ChangeSize
		}
		if ch&^allowed != 0 {
			return fmt.Errorf("setattr %s: %w", n, ErrNotPermitted)
		}
		_, err := f.Attr(n)
		return err
	}
	path, err := f.incomingPath(n)
	if err != nil {
		return err
	}
	if ch&ChangeSize != 0 {
		if err := f.incomingChange(n.incomingDirName(), func() error { return os.Truncate(path, size) }); err != nil {
			return err
		}
	}
	if ch&ChangeTimes != 0 && (!atime.IsZero() || !mtime.IsZero()) {
		return os.Chtimes(path, atime, mtime)
	}
	return nil
}

// makeIncoming is mkdir of name in incoming/.
func (f *FS) makeIncoming(name string) (Node, error) {
	if err := f.st.MakeIncoming(name); err != nil {
		return Node{}, fmt.Errorf("mkdir incoming %q: %w", name, err)
	}
	return f.lookupIncomingDir(name)
}

// rmdirIncoming is rmdir of incoming/<name>: store.RemoveIncoming, which
// refuses while files remain (store.ErrNotEmpty; `rm -r` removes them
// first, and a published directory is empty).
func (f *FS) rmdirIncoming(name string) error {
	in := &f.incoming
	in.mu.Lock()
	busy := in.publishing[name]
	in.mu.Unlock()
	if busy {
		return fmt.Errorf("rmdir incoming %s: %w", name, ErrIncomingBusy)
	}
	if err := f.st.RemoveIncoming(name); err != nil {
		return fmt.Errorf("rmdir incoming %s: %w", name, err)
	}
	in.mu.Lock()
	delete(in.outcome, name)
	delete(in.published, name)
	in.mu.Unlock()
	return nil
}

// The kernel sends a handle's RELEASE after close(2) has returned, so
// `cp ... && echo publish > ctl` may find cp's handles still open for
// writing: a publication waits up to releaseWait for them to go, polling
// every releasePoll, before it refuses with ErrIncomingBusy.
const (
	releaseWait = 2 * time.Second
	releasePoll = 10 * time.Millisecond
)

// incomingCommand runs a line written to incoming/<name>/ctl: `publish`
// publishes the directory with store.PublishIncoming, durable when it
// returns; status then names the generation, or the refusal and its
// errno, which is also the write's error. Refused at once while a
// publication of the directory runs (ErrIncomingBusy), and after one
// succeeded (ErrIncomingPublished); neither refusal changes status.
func (f *FS) incomingCommand(n Node, line []byte) error {
	cmd, err := commandLine(line)
	if err != nil {
		return fmt.Errorf("write %s: %w", n, err)
	}
	if cmd != "publish" {
		return fmt.Errorf("write %s: %q is not publish: %w", n, cmd, ErrBadWrite)
	}
	name := n.name
	if _, err := f.lookupIncomingDir(name); err != nil {
		return err
	}
	in := &f.incoming
	in.mu.Lock()
	if g, ok := in.published[name]; ok {
		in.mu.Unlock()
		return fmt.Errorf("publish incoming %s: already published as %s; make a new incoming directory for another capture: %w", name, g, ErrIncomingPublished)
	}
	for deadline := time.Now().Add(releaseWait); in.writers[name] > 0 && time.Now().Before(deadline); {
		in.mu.Unlock()
		time.Sleep(releasePoll)
		in.mu.Lock()
	}
	switch {
	case in.publishing[name]:
		in.mu.Unlock()
		return fmt.Errorf("publish incoming %s: already being published: %w", name, ErrIncomingBusy)
	case in.writers[name] > 0:
		w := in.writers[name]
		in.mu.Unlock()
		err := fmt.Errorf("publish incoming %s: %d files open for writing; close them first: %w", name, w, ErrIncomingBusy)
		f.setIncomingOutcome(name, err, store.Generation{})
		return err
	}
	if in.publishing == nil {
		in.publishing = map[string]bool{}
	}
	in.publishing[name] = true
	in.mu.Unlock()
	g, err := f.st.PublishIncoming(name)
	f.setIncomingOutcome(name, err, g)
	in.mu.Lock()
	delete(in.publishing, name)
	if err == nil {
		if in.published == nil {
			in.published = map[string]store.GenerationID{}
		}
		in.published[name] = g.ID
	}
	in.mu.Unlock()
	return err // PublishIncoming's errors name the directory
}

func (f *FS) setIncomingOutcome(name string, err error, g store.Generation) {
	text := fmt.Sprintf("published %s\n", g.ID)
	if err != nil {
		e, _ := match(err)
		text = fmt.Sprintf("refused %s: %s\n", e, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	in := &f.incoming
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.outcome == nil {
		in.outcome = map[string]string{}
	}
	in.outcome[name] = text
}
