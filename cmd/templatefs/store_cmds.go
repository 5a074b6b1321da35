package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"templatefs/internal/sample"
	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// runInit creates a store; settings flags, when given, are stored with it
// (store.InitWithSettings), otherwise it starts with the defaults.
func runInit(fl *flag.FlagSet, args []string, stdout io.Writer) error {
	sf := addSettingsFlags(fl, false)
	pos, err := parseFlags(fl, args)
	if err != nil {
		return err
	}
	set, given, err := sf.apply(store.DefaultSettings())
	if err != nil {
		return err
	}
	if given {
		err = store.InitWithSettings(pos[0], set)
	} else {
		err = store.Init(pos[0])
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "initialised store %s\n", pos[0])
	return nil
}

// sampleStateSize is the length of a sample capture's state.bin.
const sampleStateSize = 64 << 10

func runSampleCapture(fl *flag.FlagSet, args []string, stdout io.Writer) error {
	version := fl.Uint("version", 6, "manifest `VERSION`: 6 (with the time contract) or 5 (capture wall clock only)")
	memory := fl.String("memory", "256MiB", "logical `SIZE` of the sparse memory.bin: bytes, or a number with KiB, MiB, GiB or TiB; a multiple of 4096")
	pos, err := parseFlags(fl, args)
	if err != nil {
		return err
	}
	if *version != 5 && *version != 6 {
		return usagef("--version %d: want 5 or 6", *version)
	}
	size, err := parseSize(*memory)
	if err != nil {
		return err
	}
	if size%4096 != 0 {
		return usagef("--memory %s: want a multiple of 4096 bytes (the page size)", *memory)
	}
	out := pos[0]
	if err := writeSample(out, uint32(*version), size, 1); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote capture %s and class %s\n", filepath.Join(out, "capture"), filepath.Join(out, "class.json"))
	return nil
}

// writeSample writes OUTDIR/capture/ anchored on this host's facts now, and
// OUTDIR/class.json.
func writeSample(out string, version uint32, memory uint64, seed uint64) error {
	host, err := store.ReadHostFacts()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	o := manifest.SampleOptions{
		Version:            version,
		MemorySizeBytes:    memory,
		StateSizeBytes:     sampleStateSize,
		VPCount:            2,
		CaptureUTC:         host.UTC,
		CaptureMonotonicNs: host.MonotonicNs,
		HostID:             host.HostID,
		BootID:             host.BootID,
		HostClock:          host.HostClock,
	}
	if err := sample.WriteCapture(filepath.Join(out, "capture"), o, seed); err != nil {
		return err
	}
	return sample.WriteClass(filepath.Join(out, "class.json"), version)
}

// preparePublish parses publish's command line; its operation publishes
// the capture (store.PublishWith, reporting the copy's progress) and
// prints the key, then the generation ID on the last line.
func preparePublish(fl *flag.FlagSet, args []string) (storeOp, error) {
	classPath := fl.String("class", "", "read the capture class from `CLASS_JSON`, a JSON file as sample-capture writes it")
	duplicate := fl.Bool("duplicate", false, "publish a second copy of a capture identical to a generation already in the store")
	pos, err := parseFlags(fl, args)
	if err != nil {
		return storeOp{}, err
	}
	*classPath = absPath(*classPath)
	captureDir := absPath(pos[1])
	run := func(st *store.Store, out opOutput) error {
		class, err := readClass(*classPath)
		if err != nil {
			return err
		}
		g, published, err := st.PublishWith(captureDir, class, store.PublishOptions{Duplicate: *duplicate, Progress: out.progress("copy")})
		if err != nil {
			return err
		}
		if !published && g.State != store.Published {
			// Its ID as the last line would hand a script a generation that
			// grants no lease: fail instead, and say how to get a usable one.
			return fmt.Errorf("capture already published as %s, which is %s and grants no new leases: lift it (mv MNT/tombstones/%s MNT/generations/) or publish --duplicate for a new copy", g.ID, g.State, g.ID)
		}
		if !published {
			fmt.Fprintf(out.stdout, "capture already published as %s\n", g.ID)
		}
		fmt.Fprintf(out.stdout, "key %s\n%s\n", g.KeyID, g.ID)
		return nil
	}
	return storeOp{dir: pos[0], args: commandLine(fl, pos[0], captureDir), run: run}, nil
}

// fileKinds names the file types that are not regular files, most
// specific first (a character device also has os.ModeDevice).
var fileKinds = []struct {
	mode os.FileMode
	name string
}{
	{os.ModeDir, "a directory"},
	{os.ModeSymlink, "a symlink"},
	{os.ModeNamedPipe, "a named pipe"},
	{os.ModeSocket, "a socket"},
	{os.ModeCharDevice, "a character device"},
	{os.ModeDevice, "a block device"},
}

// fileKind names the type of a file that is not a regular file, for a
// message: "a directory", "a named pipe", "a character device".
func fileKind(m os.FileMode) string {
	for _, k := range fileKinds {
		if m&k.mode != 0 {
			return k.name
		}
	}
	return fmt.Sprintf("of type %v", m.Type())
}

func readClass(path string) (*templatekey.Class, error) {
	// A FIFO or device would block the read (in a daemon, its stop too):
	// only a regular file is read, checked before the open and again on
	// the file opened.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file", path, fileKind(fi.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file", path, fileKind(fi.Mode()))
	}
	c, err := templatekey.DecodeClass(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
