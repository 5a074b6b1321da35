package store

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"templatefs/internal/hostclock"
)

// ReadHostFacts reads this host's facts. The monotonic value is the
// midpoint of two CLOCK_BOOTTIME reads around the UTC read, as OpenVMM's
// capture anchor does (§3.1). Errors name the file that could not be read
// or parsed.
func ReadHostFacts() (HostFacts, error) {
	f := HostFacts{HostClock: "linux-boottime"}
	ids, err := hostIDs()
	if err != nil {
		return f, err
	}
	f.HostID, f.BootID = ids[0], ids[1]
	var a, b unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &a); err != nil {
		return f, fmt.Errorf("CLOCK_BOOTTIME: %w", err)
	}
	f.UTC = hostclock.Now().UTC()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b); err != nil {
		return f, fmt.Errorf("CLOCK_BOOTTIME: %w", err)
	}
	f.MonotonicNs = uint64(a.Nano()+b.Nano()) / 2
	return f, nil
}

// hostIDs returns the machine ID and boot ID, read from their files at the
// first success and then kept: neither changes while the kernel runs, and
// reading both took a tenth of the daemon's CPU time per lease create
// (docs/performance.md). A failed read is not kept, so it is tried again.
func hostIDs() ([2][16]byte, error) {
	hostIDCache.mu.Lock()
	defer hostIDCache.mu.Unlock()
	if hostIDCache.ok {
		return hostIDCache.ids, nil
	}
	var ids [2][16]byte
	var err error
	if ids[0], err = readHex16("/etc/machine-id"); err != nil {
		return ids, err
	}
	if ids[1], err = readHex16("/proc/sys/kernel/random/boot_id"); err != nil {
		return ids, err
	}
	hostIDCache.ids, hostIDCache.ok = ids, true
	return ids, nil
}

var hostIDCache struct {
	mu  sync.Mutex
	ids [2][16]byte
	ok  bool
}

// readHex16 reads a file holding 32 hex digits, dashes allowed (a UUID).
func readHex16(path string) ([16]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return [16]byte{}, err
	}
	return parseUUIDText(path, string(data))
}
