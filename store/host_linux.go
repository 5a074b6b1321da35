package store

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ReadHostFacts reads this host's facts. The monotonic value is the
// midpoint of two CLOCK_BOOTTIME reads around the UTC read, as OpenVMM's
// capture anchor does (§3.1). Errors name the file that could not be read
// or parsed.
func ReadHostFacts() (HostFacts, error) {
	f := HostFacts{HostClock: "linux-boottime"}
	var err error
	if f.HostID, err = readHex16("/etc/machine-id"); err != nil {
		return f, err
	}
	if f.BootID, err = readHex16("/proc/sys/kernel/random/boot_id"); err != nil {
		return f, err
	}
	var a, b unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &a); err != nil {
		return f, fmt.Errorf("CLOCK_BOOTTIME: %w", err)
	}
	f.UTC = time.Now().UTC()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b); err != nil {
		return f, fmt.Errorf("CLOCK_BOOTTIME: %w", err)
	}
	f.MonotonicNs = uint64(a.Nano()+b.Nano()) / 2
	return f, nil
}

// readHex16 reads a file holding 32 hex digits, dashes allowed (a UUID).
func readHex16(path string) ([16]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return [16]byte{}, err
	}
	return parseUUIDText(path, string(data))
}
