//go:build linux

// Command benchfs is the measuring half of bench/run: each subcommand does
// one timed job and prints its figure on stdout as a bare number; bench/run
// names the figures and computes the ratios. Progress and notes go to
// stderr.
//
//	benchfs capture OUTDIR SIZE          OUTDIR/capture with a dense memory.bin, OUTDIR/class.json
//	benchfs read [-for SECONDS] [-cold] FILE...  sequential reads of each FILE, 1 MiB at a time, the files in turn, a pass each, until each has read for SECONDS; -cold drops the page cache before each pass: MiB/s per FILE, one line each
//	benchfs evict FILE...                drop the files' clean cached pages (POSIX_FADV_DONTNEED)
//	benchfs fsync DIR COUNT              durable records, temp + fsync + rename + dir fsync each: records/s
//	benchfs create DIR[:DIR...] CALLERS COUNT PREFIX  COUNT files O_CREAT|O_EXCL + close from CALLERS goroutines, caller k in the k-th DIR: files/s
//	benchfs stat COUNT FILE...           stat(2) latency of each FILE, COUNT stats each, the files taken in turn: 99th percentile per FILE, one line each, µs
//	benchfs leases STORE GEN COUNT CALLERS   COUNT leases by store.AcquireLease (store not mounted): leases/s
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"templatefs/bench/internal/cli"
	"templatefs/bench/internal/parallel"
	"templatefs/internal/sample"
	"templatefs/store"
	"templatefs/store/manifest"
)

// chunk is the read and write unit: 1 MiB, the largest FUSE read (fs.maxIO).
const chunk = 1 << 20

func main() {
	if len(os.Args) < 2 {
		cli.Fail(errors.New("usage: benchfs capture|read|evict|fsync|create|stat|leases ARGS (see the package doc)"))
	}
	args := os.Args[2:]
	var err error
	switch cmd := os.Args[1]; cmd {
	case "capture":
		err = cli.WithArgs(args, 2, func() error { return capture(args[0], args[1]) })
	case "read":
		err = read(args)
	case "evict":
		err = evict(args)
	case "fsync":
		err = cli.WithArgs(args, 2, func() error { return fsyncRecords(args[0], args[1]) })
	case "create":
		err = cli.WithArgs(args, 4, func() error { return create(args[0], args[1], args[2], args[3]) })
	case "stat":
		err = statLatency(args)
	case "leases":
		err = cli.WithArgs(args, 4, func() error { return leases(args[0], args[1], args[2], args[3]) })
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		cli.Fail(err)
	}
}

// capture writes a sample capture anchored on this host now, as
// `templatefs sample-capture` does, then fills every hole of memory.bin so
// that reading it reads the disk (sample captures are sparse).
func capture(out, sizeArg string) error {
	size, err := cli.Count(sizeArg)
	if err != nil {
		return err
	}
	host, err := store.ReadHostFacts()
	if err != nil {
		return err
	}
	o := manifest.SampleOptions{
		Version:            6,
		MemorySizeBytes:    uint64(size),
		StateSizeBytes:     64 << 10,
		VPCount:            2,
		CaptureUTC:         host.UTC,
		CaptureMonotonicNs: host.MonotonicNs,
		HostID:             host.HostID,
		BootID:             host.BootID,
		HostClock:          host.HostClock,
	}
	dir := filepath.Join(out, "capture")
	if err := sample.WriteCapture(dir, o, 1); err != nil {
		return err
	}
	if err := sample.WriteClass(filepath.Join(out, "class.json"), o.Version); err != nil {
		return err
	}
	return densify(filepath.Join(dir, "memory.bin"), int64(size))
}

// densify overwrites all size bytes of path with non-zero data and fsyncs.
func densify(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	block := make([]byte, chunk)
	for i := range block {
		block[i] = byte(i*7+1) | 1
	}
	for off := int64(0); off < size; off += chunk {
		n := min(int64(chunk), size-off)
		if _, err := f.WriteAt(block[:n], off); err != nil {
			return fmt.Errorf("%s at %d: %w", path, off, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// read reads files from start to end, a pass of each in turn, until each
// has read for the time given by -for (one pass at least), and prints
// MiB/s over each file's passes, one line per file in order. Taking the
// files in turn, pass by pass, lets each see the same moments of a busy
// machine, and reading for a second or more is long enough to compare.
// With -cold each pass starts with the page cache dropped (drop_caches
// where permitted, else the clean pages of every file given); the drop is
// not timed.
func read(args []string) error {
	flags := flag.NewFlagSet("read", flag.ContinueOnError)
	secs := flags.Float64("for", 0, "read until each file has read for `SECONDS`")
	cold := flags.Bool("cold", false, "drop the page cache before each pass")
	if err := flags.Parse(args); err != nil {
		return err
	}
	paths := flags.Args()
	if len(paths) == 0 {
		return errors.New("read: want FILE...")
	}
	files := make([]*os.File, len(paths))
	for k, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		files[k] = f
	}
	buf := make([]byte, chunk)
	total := make([]int64, len(files))
	took := make([]time.Duration, len(files))
	passes := 0
	for done := false; !done; {
		done = true
		for k, f := range files {
			if *cold {
				if err := dropCache(paths); err != nil {
					return err
				}
			}
			start := time.Now()
			n, err := readAll(f, buf)
			took[k] += time.Since(start)
			total[k] += n
			if err != nil {
				return fmt.Errorf("%s: %w", paths[k], err)
			}
			if took[k].Seconds() < *secs {
				done = false
			}
		}
		passes++
	}
	for k, path := range paths {
		fmt.Fprintf(os.Stderr, "read %s: %d bytes in %d passes, %.3f s\n", path, total[k], passes, took[k].Seconds())
		fmt.Printf("%.1f\n", float64(total[k])/(1<<20)/took[k].Seconds())
	}
	return nil
}

// readAll reads f from offset 0 to its end through buf and returns the
// bytes read.
func readAll(f *os.File, buf []byte) (int64, error) {
	var off int64
	for {
		n, err := f.ReadAt(buf, off)
		off += int64(n)
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, fmt.Errorf("at %d: %w", off, err)
		}
	}
}

// dropCache makes the next read of each of paths come from the disk:
// sync, then drop_caches where permitted, else evict the files' pages.
func dropCache(paths []string) error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err == nil {
		return nil
	}
	return evict(paths)
}

// evict asks the kernel to drop each file's clean cached pages, the
// unprivileged way to make the next read of that file cold.
func evict(paths []string) error {
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return fmt.Errorf("fadvise %s: %w", path, err)
		}
	}
	return nil
}

// record is the body of one durable record, about the size of a lease.
var record = []byte(`{"clone_id":"clone-000000","store_generation":"g000001","seq":1,"state":"reserved"}` + "\n")

// fsyncRecords writes count records into dir, each as a temporary file,
// fsynced, renamed to its name and made durable by fsyncing dir: the
// file-per-record way to persist what a lease persists. It prints
// records/s.
func fsyncRecords(dir, countArg string) error {
	n, err := cli.Count(countArg)
	if err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	start := time.Now()
	for i := range n {
		tmp := filepath.Join(dir, fmt.Sprintf(".rec-%d.tmp", i))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := f.Write(record); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("rec-%d", i))); err != nil {
			return err
		}
		if err := d.Sync(); err != nil {
			return fmt.Errorf("fsync directory %s: %w", dir, err)
		}
	}
	fmt.Printf("%.1f\n", float64(n)/time.Since(start).Seconds())
	return nil
}

// create makes count files DIR/PREFIX-<i> with O_CREAT|O_EXCL and closes
// each, from callers goroutines at once, and prints files/s. dirs is one
// directory or several joined by ':'; caller k creates in the k-th (mod
// their number), as orchestrators that give each template its own
// generation do. Any failed create fails the run.
func create(dirs, callersArg, countArg, prefix string) error {
	callers, err := cli.Count(callersArg)
	if err != nil {
		return err
	}
	n, err := cli.Count(countArg)
	if err != nil {
		return err
	}
	dirList := strings.Split(dirs, ":")
	rate, err := parallel.Rate(callers, n, func(caller, i int) error {
		path := filepath.Join(dirList[caller%len(dirList)], fmt.Sprintf("%s-%07d", prefix, i))
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err == nil {
			err = unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("%.1f\n", rate)
	return nil
}

// statLatency stats each of paths count times, the paths taken in turn
// (so each sees the same moments of the machine), and prints the 99th
// percentile of each path's latencies in µs, one line per path in order.
func statLatency(args []string) error {
	if len(args) < 2 {
		return errors.New("stat: want COUNT FILE...")
	}
	n, err := cli.Count(args[0])
	if err != nil {
		return err
	}
	paths := args[1:]
	lat := make([][]time.Duration, len(paths))
	var st unix.Stat_t
	for range n {
		for k, path := range paths {
			start := time.Now()
			if err := unix.Stat(path, &st); err != nil {
				return fmt.Errorf("stat %s: %w", path, err)
			}
			lat[k] = append(lat[k], time.Since(start))
		}
	}
	for _, l := range lat {
		slices.Sort(l)
		fmt.Printf("%.1f\n", float64(l[n*99/100].Nanoseconds())/1e3)
	}
	return nil
}

// leases acquires count leases clone-<i> on generation gen of the store in
// dir from callers goroutines, through store.AcquireLease and so its group
// commits, and prints leases/s.
func leases(dir, genArg, countArg, callersArg string) error {
	gen, err := store.ParseGenerationID(genArg)
	if err != nil {
		return err
	}
	n, err := cli.Count(countArg)
	if err != nil {
		return err
	}
	callers, err := cli.Count(callersArg)
	if err != nil {
		return err
	}
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	rate, err := parallel.Rate(callers, n, func(_, i int) error {
		if _, _, err := st.AcquireLease(gen, fmt.Sprintf("clone-%07d", i)); err != nil {
			return err
		}
		if i%100000 == 99999 {
			fmt.Fprintf(os.Stderr, "leases: %d of %d after %.1f s\n", i+1, n, time.Since(start).Seconds())
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("%.1f\n", rate)
	return st.Close()
}
