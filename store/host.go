package store

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// HostFacts are the host identity and clocks that a v6 time contract is
// anchored on (openvmm-snapshot-format.md §3.1, fields 6 to 10), read on
// the destination to decide eligibility (§7.2).
type HostFacts struct {
	// HostID is Linux /etc/machine-id (32 hex digits as 16 bytes), or the
	// Windows MachineGuid registry value with dashes and braces stripped.
	HostID [16]byte
	// BootID is Linux /proc/sys/kernel/random/boot_id (a UUID as 16
	// bytes), or the Windows PrefetchParameters\BootId DWORD,
	// little-endian, zero-extended to 16 bytes.
	BootID [16]byte
	// HostClock is the monotonic clock's kind: "linux-boottime" or
	// "windows-interrupt-time".
	HostClock string
	// MonotonicNs is that clock now, in nanoseconds: CLOCK_BOOTTIME, or
	// QueryInterruptTimePrecise × 100.
	MonotonicNs uint64
	// UTC is the wall clock now.
	UTC time.Time
}

// Host reads this host's facts. The store asks for them once per
// eligibility decision, just before the transaction that depends on them.
// Implementations must be safe for concurrent use.
type Host interface {
	Facts() (HostFacts, error)
}

// HostFunc adapts a function to Host, so tests can pass fixture facts.
type HostFunc func() (HostFacts, error)

// Facts calls f.
func (f HostFunc) Facts() (HostFacts, error) { return f() }

// parseUUIDText parses s, read from src, as 32 hex digits with dashes
// allowed (a UUID) and surrounding white space ignored.
func parseUUIDText(src, s string) ([16]byte, error) {
	var out [16]byte
	s = strings.ReplaceAll(strings.TrimSpace(s), "-", "")
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return out, fmt.Errorf("%s: want 32 hex digits, found %q", src, s)
	}
	copy(out[:], b)
	return out, nil
}

// parseMachineGUID parses a Windows MachineGuid value, read from src: a
// GUID in its text form, braces optional, taken as 16 bytes in the order
// its hex digits are written (§3.1: dashes and braces stripped).
func parseMachineGUID(src, s string) ([16]byte, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = s[1 : len(s)-1]
	}
	return parseUUIDText(src, s)
}

// bootIDFromDWORD is the Windows boot ID as §3.1 defines it: the
// PrefetchParameters\BootId DWORD, little-endian, zero-extended to 16
// bytes.
func bootIDFromDWORD(v uint32) [16]byte {
	var out [16]byte
	binary.LittleEndian.PutUint32(out[:4], v)
	return out
}
