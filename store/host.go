package store

import "time"

// HostFacts are the host identity and clocks that a v6 time contract is
// anchored on (openvmm-snapshot-format.md §3.1, fields 6 to 10), read on
// the destination to decide eligibility (§7.2).
type HostFacts struct {
	HostID      [16]byte  // Linux /etc/machine-id, 32 hex digits as 16 bytes
	BootID      [16]byte  // Linux /proc/sys/kernel/random/boot_id, a UUID as 16 bytes
	HostClock   string    // the monotonic clock's kind: "linux-boottime"
	MonotonicNs uint64    // that clock now, in nanoseconds (CLOCK_BOOTTIME)
	UTC         time.Time // wall clock now
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
