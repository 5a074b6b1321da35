//go:build linux

// Command benchfs is the measuring half of bench/run: each subcommand does
// one timed job and prints its figure on stdout as a bare number; bench/run
// names the figures and computes the ratios. Progress and notes go to
// stderr.
//
//	benchfs capture OUTDIR SIZE          OUTDIR/capture with a dense memory.bin, OUTDIR/class.json
//	benchfs read FILE                    sequential read, 1 MiB at a time: MiB/s
//	benchfs evict FILE...                drop the files' clean cached pages (POSIX_FADV_DONTNEED)
//	benchfs fsync DIR COUNT              durable records, temp + fsync + rename + dir fsync each: records/s
//	benchfs create DIR[:DIR...] CALLERS COUNT PREFIX  COUNT files O_CREAT|O_EXCL + close from CALLERS goroutines, caller k in the k-th DIR: files/s
//	benchfs stat FILE COUNT              stat(2) latency, 99th percentile: µs
//	benchfs leases STORE GEN COUNT CALLERS   COUNT leases by store.AcquireLease (store not mounted): leases/s
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"templatefs/internal/sample"
	"templatefs/store"
	"templatefs/store/manifest"
)

// chunk is the read and write unit: 1 MiB, the largest FUSE read (fs.maxIO).
const chunk = 1 << 20

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: benchfs capture|read|evict|fsync|create|stat|leases ARGS (see the package doc)"))
	}
	args := os.Args[2:]
	var err error
	switch cmd := os.Args[1]; cmd {
	case "capture":
		err = withArgs(args, 2, func() error { return capture(args[0], args[1]) })
	case "read":
		err = withArgs(args, 1, func() error { return read(args[0]) })
	case "evict":
		err = evict(args)
	case "fsync":
		err = withArgs(args, 2, func() error { return fsyncRecords(args[0], args[1]) })
	case "create":
		err = withArgs(args, 4, func() error { return create(args[0], args[1], args[2], args[3]) })
	case "stat":
		err = withArgs(args, 2, func() error { return statLatency(args[0], args[1]) })
	case "leases":
		err = withArgs(args, 4, func() error { return leases(args[0], args[1], args[2], args[3]) })
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "benchfs: %v\n", err)
	os.Exit(1)
}

func withArgs(args []string, n int, f func() error) error {
	if len(args) != n {
		return fmt.Errorf("want %d arguments, got %d", n, len(args))
	}
	return f()
}

func count(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("count %q: want a positive integer", s)
	}
	return n, nil
}

// capture writes a sample capture anchored on this host now, as
// `templatefs sample-capture` does, then fills every hole of memory.bin so
// that reading it reads the disk (sample captures are sparse).
func capture(out, sizeArg string) error {
	size, err := count(sizeArg)
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

// read reads path from start to end and prints MiB/s.
func read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, chunk)
	start := time.Now()
	var total int64
	for {
		n, err := f.Read(buf)
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s at %d: %w", path, total, err)
		}
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "read %s: %d bytes in %.3f s\n", path, total, secs)
	fmt.Printf("%.1f\n", float64(total)/(1<<20)/secs)
	return nil
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
	n, err := count(countArg)
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
	callers, err := count(callersArg)
	if err != nil {
		return err
	}
	n, err := count(countArg)
	if err != nil {
		return err
	}
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	dirList := strings.Split(dirs, ":")
	for k := range callers {
		dir := dirList[k%len(dirList)]
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				fd, err := unix.Open(filepath.Join(dir, fmt.Sprintf("%s-%07d", prefix, i)), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
				if err == nil {
					err = unix.Close(fd)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("create %s-%07d in %s: %w", prefix, i, dir, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	fmt.Printf("%.1f\n", float64(n)/time.Since(start).Seconds())
	return nil
}

// statLatency stats path count times and prints the 99th percentile in µs.
func statLatency(path, countArg string) error {
	n, err := count(countArg)
	if err != nil {
		return err
	}
	lat := make([]time.Duration, n)
	var st unix.Stat_t
	for i := range lat {
		start := time.Now()
		if err := unix.Stat(path, &st); err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	fmt.Printf("%.1f\n", float64(lat[n*99/100].Nanoseconds())/1e3)
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
	n, err := count(countArg)
	if err != nil {
		return err
	}
	callers, err := count(callersArg)
	if err != nil {
		return err
	}
	st, err := store.Open(dir, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer st.Close()
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if _, _, err := st.AcquireLease(gen, fmt.Sprintf("clone-%07d", i)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				if i%100000 == 99999 {
					fmt.Fprintf(os.Stderr, "leases: %d of %d after %.1f s\n", i+1, n, time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	fmt.Printf("%.1f\n", float64(n)/time.Since(start).Seconds())
	return st.Close()
}
