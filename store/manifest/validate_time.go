package manifest

import "strings"

// Time ABI constants (openvmm-snapshot-format.md §3.1).
const (
	// TimeABIVersion is the only time_abi_version.
	TimeABIVersion = 1
	// TSCTolerancePPM is the only tsc_tolerance_ppm of a time contract.
	TSCTolerancePPM = 250
	// MinTSCFrequencyHz is the lowest plausible tsc_frequency_hz (0.5 GHz).
	MinTSCFrequencyHz = 500_000_000
	// MaxTSCFrequencyHz is the highest plausible tsc_frequency_hz (10 GHz).
	MaxTSCFrequencyHz = 10_000_000_000
	// APICFrequencyKVM is the LAPIC timer rate on KVM.
	APICFrequencyKVM = 1_000_000_000
	// APICFrequencyHyperV is the LAPIC timer rate on MSHV and WHP.
	APICFrequencyHyperV = 200_000_000
	// HostClockLinuxBoottime is the host_clock of CLOCK_BOOTTIME.
	HostClockLinuxBoottime = "linux-boottime"
	// HostClockWindowsInterrupt is the host_clock of
	// QueryInterruptTimePrecise × 100.
	HostClockWindowsInterrupt = "windows-interrupt-time"
	// maxCaptureGeneration is exclusive: E_GENERATION_EXHAUSTED.
	maxCaptureGeneration = 0xFFFF_FFFF
)

// validate applies §3.1 to a time contract.
func (t *TimeContract) validate() error {
	const name = contractPath + ".time"
	switch {
	case t.TimeABIVersion != TimeABIVersion:
		return invalidf("%s.time_abi_version is %d, want %d", name, t.TimeABIVersion, TimeABIVersion)
	case t.TSCFrequencyHz < MinTSCFrequencyHz || t.TSCFrequencyHz > MaxTSCFrequencyHz:
		return invalidf("%s.tsc_frequency_hz %d outside %d..%d", name, t.TSCFrequencyHz, uint64(MinTSCFrequencyHz), uint64(MaxTSCFrequencyHz))
	case t.TSCTolerancePPM != TSCTolerancePPM:
		return invalidf("%s.tsc_tolerance_ppm is %d, want %d", name, t.TSCTolerancePPM, TSCTolerancePPM)
	case t.APICFrequencyHz != APICFrequencyKVM && t.APICFrequencyHz != APICFrequencyHyperV:
		return invalidf("%s.apic_frequency_hz is %d, want %d or %d", name, t.APICFrequencyHz, APICFrequencyKVM, APICFrequencyHyperV)
	case t.HostClock != HostClockLinuxBoottime && t.HostClock != HostClockWindowsInterrupt:
		return invalidf("%s.host_clock %q is not %q or %q", name, t.HostClock, HostClockLinuxBoottime, HostClockWindowsInterrupt)
	case len(t.HostID) != hostIDSize:
		return invalidf("%s.host_id is %d bytes, want %d", name, len(t.HostID), hostIDSize)
	case len(t.HostBootID) != hostIDSize:
		return invalidf("%s.host_boot_id is %d bytes, want %d", name, len(t.HostBootID), hostIDSize)
	case t.CaptureGeneration >= maxCaptureGeneration:
		return invalidf("%s.capture_generation %d is exhausted (limit %d)", name, t.CaptureGeneration, uint32(maxCaptureGeneration-1))
	}
	return nil
}

// validate applies §3.2 to a CPU profile: id syntax, profile ≤ 1 MiB with
// its digest, effective CPUID 1 B..64 KiB with its digest. The CPUID bytes
// are opaque (their record layout changed between builds).
func (p *CPUProfile) validate() error {
	const name = contractPath + ".cpu_profile"
	if !validProfileID(p.ID) {
		return invalidf("%s.id %q is not 1..%d dot-separated components of [a-z0-9-]", name, p.ID, maxCPUProfileIDLength)
	}
	if len(p.Profile) > maxCPUProfile {
		return invalidf("%s.profile is %d bytes, limit %d", name, len(p.Profile), maxCPUProfile)
	}
	if err := checkDigest(name+".sha256", p.SHA256, p.Profile); err != nil {
		return err
	}
	if len(p.EffectiveCPUID) == 0 || len(p.EffectiveCPUID) > maxEffectiveCPUID {
		return invalidf("%s.effective_cpuid is %d bytes, want 1..%d", name, len(p.EffectiveCPUID), maxEffectiveCPUID)
	}
	return checkDigest(name+".effective_cpuid_sha256", p.EffectiveCPUIDSHA256, p.EffectiveCPUID)
}

// validProfileID reports whether id is 1..64 characters of dot-separated
// non-empty components over [a-z0-9-] (§3.2).
func validProfileID(id string) bool {
	if id == "" || len(id) > maxCPUProfileIDLength {
		return false
	}
	for part := range strings.SplitSeq(id, ".") {
		if part == "" || strings.ContainsFunc(part, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-'
		}) {
			return false
		}
	}
	return true
}
