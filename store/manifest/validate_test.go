package manifest

import (
	"crypto/sha256"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleOptions dates its capture on a fixed day on purpose: nothing here
// meets the real clock. The manifest package reads no clock at all, and
// every check that needs "now" (ValidateAt, OpenCapture) is given
// sampleNow below, derived from the same date.
func sampleOptions(version uint32) SampleOptions {
	return SampleOptions{
		Version:            version,
		MemorySizeBytes:    5 << 30,
		StateSizeBytes:     4096,
		VPCount:            2,
		CaptureUTC:         time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC),
		CaptureMonotonicNs: 123_000_000_000,
		HostID:             [16]byte{0: 0xaa, 15: 0x01},
		BootID:             [16]byte{0: 0xbb, 15: 0x02},
		HostClock:          HostClockLinuxBoottime,
	}
}

// sampleNow is the host's clock in tests that need one: an hour after the
// capture time of sampleOptions.
var sampleNow = sampleOptions(6).CaptureUTC.Add(time.Hour)

func TestSampleValidates(t *testing.T) {
	for _, version := range []uint32{5, 6} {
		for _, vps := range []uint32{0, 1, 2, 4, 8} {
			for _, mem := range []uint64{0, 1 << 20, 3 << 30, 3<<30 + 4096, 64 << 30} {
				o := sampleOptions(version)
				o.VPCount, o.MemorySizeBytes = vps, mem
				m := Sample(o)
				if err := m.Validate(); err != nil {
					t.Errorf("v%d, %d VPs, %d bytes: %v", version, vps, mem, err)
					continue
				}
				got, err := Decode(Encode(m))
				if err != nil || !reflect.DeepEqual(got, m) {
					t.Errorf("v%d, %d VPs, %d bytes: Decode(Encode(m)) = %v, differs: %t", version, vps, mem, err, !reflect.DeepEqual(got, m))
				}
			}
		}
	}
	m := Sample(SampleOptions{})
	if m.Version != 6 || m.VPCount != 1 || m.MemorySizeBytes != 128<<20 || m.Contract.Time.HostClock != HostClockLinuxBoottime {
		t.Errorf("Sample defaults: version %d, %d VPs, %d bytes, clock %q", m.Version, m.VPCount, m.MemorySizeBytes, m.Contract.Time.HostClock)
	}
	if n := len(m.Contract.Devices); n != 11 {
		t.Errorf("Sample has %d devices, want the 11 of §2.3", n)
	}
	if got := m.Contract.StateUnitNames[len(m.Contract.StateUnitNames)-1]; got != "time-abi" {
		t.Errorf("v6 sample last state unit is %q, want time-abi", got)
	}
}

func TestSampleMemoryRanges(t *testing.T) {
	m := Sample(SampleOptions{MemorySizeBytes: 5 << 30})
	want := []MemoryRange{{GPAStart: 0, Length: 3 << 30}, {GPAStart: 4 << 30, Length: 2 << 30, FileOffset: 3 << 30}}
	if !reflect.DeepEqual(m.Contract.MemoryRanges, want) {
		t.Errorf("ranges = %+v, want %+v", m.Contract.MemoryRanges, want)
	}
}

func withScratch(m *Manifest, tier, policy string, paired bool) *Manifest {
	digest := sha256.Sum256(nil)
	scratch := SandboxBlock{Role: "scratch", Length: 1 << 20, IdentityKind: "fresh", LogicalBlockSize: 512, PhysicalBlockSize: 4096}
	if paired {
		scratch.IdentityKind, scratch.Identity, scratch.Artifact = "sha256", digest[:], ScratchFileName
	}
	m.Contract.SandboxBlocks = []SandboxBlock{
		{Role: "distro", ReadOnly: true, Length: 8 << 20, IdentityKind: "unbound", LogicalBlockSize: 512, PhysicalBlockSize: 512},
		scratch,
	}
	m.SnapshotTier, m.RestorePolicy = tier, policy
	m.ConsumedConfigSections = map[bool]uint32{false: 1, true: 7}[paired]
	return m
}

func TestValidate(t *testing.T) {
	v5 := func() *Manifest { return Sample(sampleOptions(5)) }
	v6 := func() *Manifest { return Sample(sampleOptions(6)) }
	aarch64 := func() *Manifest { return aarch64Manifest(Sample(sampleOptions(6))) }
	std := func(version uint32) func() *Manifest { return func() *Manifest { return standardManifest(version) } }
	contract := func(m *Manifest) *MachineContract { return m.Contract }
	type row struct {
		name    string
		base    func() *Manifest
		mutate  func(m *Manifest)
		want    error // nil: valid
		mention string
	}
	rows := []row{
		{"v5 sample", v5, func(*Manifest) {}, nil, ""},
		{"v6 sample", v6, func(*Manifest) {}, nil, ""},
		{"v5 standard", std(5), func(*Manifest) {}, nil, ""},
		{"state size at limit", v6, func(m *Manifest) { m.StateSizeBytes = MaxStateSize }, nil, ""},
		{"v6 ignores fields 9 and 10", v6, func(m *Manifest) { m.StateSHA256 = []byte{1} }, nil, ""},
		{"capture generation at limit", v6, func(m *Manifest) { m.Contract.Time.CaptureGeneration = 0xFFFF_FFFE }, nil, ""},
		{"MSHV APIC rate", v6, func(m *Manifest) { m.Contract.Time.APICFrequencyHz = 200_000_000 }, nil, ""},
		{"windows clock", v6, func(m *Manifest) { m.Contract.Time.HostClock = HostClockWindowsInterrupt }, nil, ""},
		{"platform tier", v6, func(m *Manifest) { withScratch(m, "platform", "clone", false) }, nil, ""},
		{"workload-start tier", v5, func(m *Manifest) { withScratch(m, "workload-start", "clone", true) }, nil, ""},
		{"instance-checkpoint tier", v6, func(m *Manifest) { withScratch(m, "instance-checkpoint", "resume", true) }, nil, ""},
		{"ABI 3 image slots", v6, func(m *Manifest) {
			m.Contract.MicrovmABIVersion, m.Contract.ImageSlotCapacity, m.Contract.BootActiveImageSlotCount = 3, 4, 1
		}, nil, ""},

		{"version 0", std(0), func(*Manifest) {}, ErrUnsupportedVersion, "manifest.version 0 is not supported (supported: 5, 6)"},
		{"version 4", std(4), func(*Manifest) {}, ErrUnsupportedVersion, "version 4"},
		{"version 7", std(7), func(*Manifest) {}, ErrUnsupportedVersion, "version 7"},
		{"garbled magic", v6, func(m *Manifest) { m.FormatMagic[0] = 'X' }, ErrBadMagic, `"XPENVMM_SNAPSHOT_V6\x00" does not match version 6`},
		{"magic without NUL", v5, func(m *Manifest) { m.FormatMagic = m.FormatMagic[:19] }, ErrBadMagic, "version 5"},
		{"empty magic", std(5), func(m *Manifest) { m.FormatMagic = nil }, ErrBadMagic, `want "OPENVMM_SNAPSHOT_V5\x00"`},
		{"v5 version with v6 magic", std(5), func(m *Manifest) { m.FormatMagic = Magic(6) }, ErrBadMagic, "does not match version 5"},
		{"v6 version with v5 magic", v6, func(m *Manifest) { m.FormatMagic = Magic(5) }, ErrBadMagic, "does not match version 6"},
		{"schema 2", v6, func(m *Manifest) { m.SavedStateSchemaVersion = 2 }, ErrInvalid, "saved_state_schema_version is 2"},
		{"root type", v5, func(m *Manifest) { m.SavedStateRootType = "x" }, ErrInvalid, "saved_state_root_type"},
		{"state too large", std(6), func(m *Manifest) { m.StateSizeBytes = MaxStateSize + 1 }, ErrInvalid, "268435457 exceeds the limit of 268435456"},
		{"memory beyond a file length", std(6), func(m *Manifest) { m.MemorySizeBytes = math.MaxInt64 + 1 }, ErrInvalid, "memory_size_bytes"},
		{"v5 state digest", std(5), func(m *Manifest) { m.StateSHA256 = make([]byte, 32) }, ErrInvalid, "must be empty in version 5"},
		{"tier without blocks", std(5), func(m *Manifest) { m.SnapshotTier = "platform" }, ErrInvalid, "without sandbox blocks"},
		{"unknown tier", v6, func(m *Manifest) { withScratch(m, "platform", "clone", false).SnapshotTier = "gold" }, ErrInvalid, `"gold"`},
		{"tier policy mismatch", v6, func(m *Manifest) { withScratch(m, "workload-start", "resume", true) }, ErrInvalid, `tier "workload-start"`},
		{"tier without pairing", v6, func(m *Manifest) { withScratch(m, "workload-start", "clone", false) }, ErrInvalid, "paired scratch true"},

		{"profile", v6, func(m *Manifest) { m.Contract.MachineProfile = "standard" }, ErrInvalid, "machine_profile"},
		{"hypervisor", v6, func(m *Manifest) { m.Contract.SourceHypervisor = "xen" }, ErrInvalid, `source_hypervisor "xen"`},
		{"layout", v5, func(m *Manifest) { m.Contract.BootLayoutVersion = 1 }, ErrInvalid, "boot_layout_version is 1"},
		{"interrupt page", v6, func(m *Manifest) { m.Contract.VirtioSharedStatusPageGPA = 0 }, ErrInvalid, "virtio interrupt contract"},
		{"command line digest", v5, func(m *Manifest) { m.Contract.EffectiveCommandLine += " quiet" }, ErrInvalid, "effective_command_line_sha256"},
		{"command line NUL", v6, func(m *Manifest) { m.Contract.EffectiveCommandLine = "a\x00b" }, ErrInvalid, "NUL at byte 1"},
		{"no memory ranges", v6, func(m *Manifest) { m.Contract.MemoryRanges = nil }, ErrInvalid, "0 ranges, want 1..128"},
		{"129 memory ranges", v6, func(m *Manifest) { m.Contract.MemoryRanges = make([]MemoryRange, 129) }, ErrInvalid, "129 ranges"},
		{"zero-length range", v6, func(m *Manifest) { m.Contract.MemoryRanges[1].Length = 0 }, ErrInvalid, "memory_ranges[1] has length 0"},
		{"range overflows", v6, func(m *Manifest) { m.Contract.MemoryRanges[1].GPAStart = math.MaxUint64 }, ErrInvalid, "overflows"},
		{"range beyond memory.bin", v6, func(m *Manifest) { m.Contract.MemoryRanges[1].FileOffset = 4 << 30 }, ErrInvalid, "beyond memory_size_bytes"},
		{"guest overlap", v6, func(m *Manifest) { m.Contract.MemoryRanges[1].GPAStart = 1 << 30 }, ErrInvalid, "overlap in guest space"},
		{"file overlap", v6, func(m *Manifest) { m.Contract.MemoryRanges[1].FileOffset = 1 << 30 }, ErrInvalid, "overlap in file space"},
		{"ranges short of memory", v6, func(m *Manifest) { m.Contract.MemoryRanges[1].Length -= 4096 }, ErrInvalid, "total 5368705024 bytes, memory_size_bytes 5368709120"},
		{"vp count 3", v6, func(m *Manifest) { m.VPCount = 3 }, ErrInvalid, "vp_count 3"},
		{"topology", v5, func(m *Manifest) { m.Contract.Topology.APICIDs = []uint32{0, 0} }, ErrInvalid, "not canonical for 2 VPs"},
		{"device order", v6, func(m *Manifest) { m.Contract.Devices[3].Order = 4 }, ErrInvalid, "devices[3].order is 4, want 3"},
		{"duplicate device", v6, func(m *Manifest) { m.Contract.Devices[7].StableID = "pit" }, ErrInvalid, `devices[7].stable_id "pit" is a duplicate`},
		{"empty device id", v5, func(m *Manifest) { m.Contract.Devices[0].StableID = "" }, ErrInvalid, "devices[0].stable_id is empty"},
		{"unlisted state unit", v6, func(m *Manifest) { m.Contract.Devices[2].StateUnitName = "x" }, ErrInvalid, `devices[2].state_unit_name "x"`},
		{"device range space", v6, func(m *Manifest) { m.Contract.Devices[6].Ranges[0].AddressSpace = "io" }, ErrInvalid, "devices[6].ranges[0]"},
		{"device range length", v6, func(m *Manifest) { m.Contract.Devices[6].Ranges[0].Length = 0 }, ErrInvalid, "devices[6].ranges[0]"},
		{"queue count", v6, func(m *Manifest) { m.Contract.Devices[6].QueueCount = 1 }, ErrInvalid, "queue_count 1 differs from 0"},
		{"duplicate state unit", v6, func(m *Manifest) { c := contract(m); c.StateUnitNames = append(c.StateUnitNames, "pit") }, ErrInvalid, `"pit" is a duplicate`},
		{"no state units", v6, func(m *Manifest) { m.Contract.StateUnitNames = nil }, ErrInvalid, "state_unit_names has 0 names"},
		{"duplicate attachment", v6, func(m *Manifest) {
			a := Attachment{StableID: "console", Identity: []byte("x")}
			m.Contract.Attachments = []Attachment{a, a}
		}, ErrInvalid, `attachments[1].stable_id "console" is a duplicate`},
		{"empty attachment identity", v6, func(m *Manifest) { m.Contract.Attachments = []Attachment{{StableID: "a"}} }, ErrInvalid, "identity is 0 bytes"},
		{"one sandbox block", v6, func(m *Manifest) {
			withScratch(m, "platform", "clone", false)
			m.Contract.SandboxBlocks = m.Contract.SandboxBlocks[1:]
		}, ErrInvalid, "1 blocks"},
		{"sandbox role order", v6, func(m *Manifest) {
			withScratch(m, "platform", "clone", false)
			m.Contract.SandboxBlocks[0].Role = "scratch"
		}, ErrInvalid, "microvm_sandbox_blocks[0].role"},
		{"artifact on a layer", v6, func(m *Manifest) {
			withScratch(m, "workload-start", "clone", true)
			m.Contract.SandboxBlocks[0].Artifact = ScratchFileName
		}, ErrInvalid, `[0].artifact "scratch.img"`},
		{"sandbox geometry", v6, func(m *Manifest) {
			withScratch(m, "platform", "clone", false)
			m.Contract.SandboxBlocks[1].Length = 1000
		}, ErrInvalid, "length 1000"},

		{"v5 wall clock nanos", v5, func(m *Manifest) { m.Contract.CaptureWallClock.Nanos = 1_000_000_000 }, ErrInvalid, "capture_wall_clock nanos 1000000000"},
		{"v5 negative nanos", v5, func(m *Manifest) { m.Contract.CaptureWallClock.Nanos = -1 }, ErrInvalid, "nanos -1"},
		{"v5 tsc", v5, func(m *Manifest) { m.Contract.TSCFrequencyHz = 0 }, ErrInvalid, "tsc_frequency_hz is 0"},
		{"v5 apic zero", v5, func(m *Manifest) { m.Contract.APICFrequencyHz = ptr[uint64](0) }, ErrInvalid, "apic_frequency_hz is present and 0"},
		{"v5 no cpu contract", v5, func(m *Manifest) { m.Contract.CPUContract = nil }, ErrInvalid, "cpu_contract is 0 bytes"},
		{"v5 cpu digest", v5, func(m *Manifest) { m.Contract.CPUContractSHA256[0] ^= 1 }, ErrInvalid, "cpu_contract_sha256"},
		{"v5 clock policy", v5, func(m *Manifest) { m.Contract.ClockPolicy = "" }, ErrInvalid, "clock_policy"},
		{"v5 ABI 3", v5, func(m *Manifest) { m.Contract.MicrovmABIVersion = 3 }, ErrInvalid, "microvm_abi_version is 3, want 2"},
		{"v5 with a time contract", v5, func(m *Manifest) { m.Contract.Time = Sample(sampleOptions(6)).Contract.Time }, ErrInvalid, "version 6 fields"},

		{"v6 ABI 1", v6, func(m *Manifest) { m.Contract.MicrovmABIVersion = 1 }, ErrInvalid, "microvm_abi_version is 1"},
		{"v6 ABI 2 with slots", v6, func(m *Manifest) { m.Contract.ImageSlotCapacity = 4 }, ErrInvalid, "microvm_image_slot_capacity is 4 for ABI 2"},
		{"v6 ABI 3 without active slots", v6, func(m *Manifest) { m.Contract.MicrovmABIVersion, m.Contract.ImageSlotCapacity = 3, 4 }, ErrInvalid, "boot_active_image_slot_count 0"},
		{"v6 no time", v6, func(m *Manifest) { m.Contract.Time = nil }, ErrInvalid, "machine_contract.time is absent"},
		{"v6 no profile", v6, func(m *Manifest) { m.Contract.CPUProfile = nil }, ErrInvalid, "cpu_profile is absent"},
		{"v6 clock token", v6, func(m *Manifest) {
			c := contract(m)
			c.EffectiveCommandLine += " tsc_early_khz=2100000"
			sum := sha256.Sum256([]byte(c.EffectiveCommandLine))
			c.EffectiveCommandLineSHA256 = sum[:]
		}, ErrInvalid, `clock token "tsc_early_khz=2100000"`},
		{"time ABI 2", v6, func(m *Manifest) { m.Contract.Time.TimeABIVersion = 2 }, ErrInvalid, "time_abi_version is 2"},
		{"TSC too slow", v6, func(m *Manifest) { m.Contract.Time.TSCFrequencyHz = 499_999_999 }, ErrInvalid, "tsc_frequency_hz 499999999 outside"},
		{"TSC too fast", v6, func(m *Manifest) { m.Contract.Time.TSCFrequencyHz = 10_000_000_001 }, ErrInvalid, "tsc_frequency_hz 10000000001"},
		{"tolerance", v6, func(m *Manifest) { m.Contract.Time.TSCTolerancePPM = 0 }, ErrInvalid, "tsc_tolerance_ppm is 0, want 250"},
		{"APIC rate", v6, func(m *Manifest) { m.Contract.Time.APICFrequencyHz = 100_000_000 }, ErrInvalid, "apic_frequency_hz is 100000000"},
		{"host clock", v6, func(m *Manifest) { m.Contract.Time.HostClock = "monotonic" }, ErrInvalid, `host_clock "monotonic"`},
		{"host id", v6, func(m *Manifest) { m.Contract.Time.HostID = m.Contract.Time.HostID[:15] }, ErrInvalid, "host_id is 15 bytes"},
		{"boot id", v6, func(m *Manifest) { m.Contract.Time.HostBootID = nil }, ErrInvalid, "host_boot_id is 0 bytes"},
		{"generation exhausted", v6, func(m *Manifest) { m.Contract.Time.CaptureGeneration = 0xFFFF_FFFF }, ErrInvalid, "capture_generation 4294967295"},
		{"profile id case", v6, func(m *Manifest) { m.Contract.CPUProfile.ID = "Intel.x" }, ErrInvalid, `cpu_profile.id "Intel.x"`},
		{"profile id empty part", v6, func(m *Manifest) { m.Contract.CPUProfile.ID = "a..b" }, ErrInvalid, "cpu_profile.id"},
		{"profile id length", v6, func(m *Manifest) { m.Contract.CPUProfile.ID = strings.Repeat("a", 65) }, ErrInvalid, "cpu_profile.id"},
		{"profile digest", v6, func(m *Manifest) { m.Contract.CPUProfile.Profile = []byte{1} }, ErrInvalid, "cpu_profile.sha256"},
		{"no effective CPUID", v6, func(m *Manifest) { m.Contract.CPUProfile.EffectiveCPUID = nil }, ErrInvalid, "effective_cpuid is 0 bytes"},
		{"effective CPUID digest", v6, func(m *Manifest) { m.Contract.CPUProfile.EffectiveCPUIDSHA256 = nil }, ErrInvalid, "effective_cpuid_sha256"},
		// Values no real capture has (issue 8 item 5), one rule a row.
		{"page size 16 KiB", v6, func(m *Manifest) { m.PageSize = 16 << 10 }, nil, ""},
		{"page size 64 KiB", std(5), func(m *Manifest) { m.PageSize = 64 << 10 }, nil, ""},
		{"page size 2 KiB", v6, func(m *Manifest) { m.PageSize = 2048 }, ErrInvalid, "manifest.page_size 2048 is not a power of two of at least 4096"},
		{"page size 0", std(5), func(m *Manifest) { m.PageSize = 0 }, ErrInvalid, "manifest.page_size 0"},
		{"page size 12 KiB", v5, func(m *Manifest) { m.PageSize = 12 << 10 }, ErrInvalid, "manifest.page_size 12288 is not a power of two"},
		{"architecture riscv64", std(5), func(m *Manifest) { m.Architecture = "riscv64" }, ErrInvalid, `manifest.architecture "riscv64" is not "x86_64" or "aarch64"`},
		{"architecture empty", v6, func(m *Manifest) { m.Architecture = "" }, ErrInvalid, `manifest.architecture ""`},
		{"aarch64 sample", aarch64, func(*Manifest) {}, nil, ""},
		{"aarch64 with the x86_64 devices", v6, func(m *Manifest) { m.Architecture = ArchAArch64 }, ErrInvalid,
			`devices[3].kind "pic" exists only on x86_64, not on manifest.architecture "aarch64"`},
		{"x86_64 with a pl011", v6, func(m *Manifest) { m.Contract.Devices[3].Kind = "pl011" }, ErrInvalid,
			`devices[3].kind "pl011" exists only on aarch64, not on manifest.architecture "x86_64"`},
		{"aarch64 with port I/O", aarch64, func(m *Manifest) { m.Contract.Devices[3].Ranges[0].AddressSpace = "pmio" }, ErrInvalid,
			`devices[3].ranges[0] is port I/O (pmio), which manifest.architecture "aarch64" does not have`},
		{"aarch64 captured by WHP", aarch64, func(m *Manifest) { m.Contract.SourceHypervisor = "whp" }, ErrInvalid,
			`source_hypervisor "whp" does not capture manifest.architecture "aarch64"`},
		{"aarch64 captured by MSHV", aarch64, func(m *Manifest) { m.Contract.SourceHypervisor = "mshv" }, ErrInvalid,
			`source_hypervisor "mshv" does not capture manifest.architecture "aarch64"`},
		{"x86_64 captured by WHP", v6, func(m *Manifest) { m.Contract.SourceHypervisor = "whp" }, nil, ""},
		{"unknown device kind", v6, func(m *Manifest) { m.Contract.Devices[2].Kind = "gpu" }, ErrInvalid,
			`devices[2].kind "gpu" is not a device kind of the format`},
		{"known attachment kind", v6, func(m *Manifest) { m.Contract.Attachments = []Attachment{consoleAttachment()} }, nil, ""},
		{"unknown attachment kind", v6, func(m *Manifest) {
			a := consoleAttachment()
			a.Kind = "socket"
			m.Contract.Attachments = []Attachment{a}
		}, ErrInvalid, `attachments[0].kind "socket" is not one of`},
		{"v6 without a machine contract", std(6), func(*Manifest) {}, ErrInvalid, "manifest.machine_contract is absent in a version 6 manifest"},
		{"created_at at MinCaptureTime", v6, func(m *Manifest) { m.CreatedAt = Timestamp{Seconds: MinCaptureTime.Unix()} }, nil, ""},
		{"created_at before 2000", v6, func(m *Manifest) { m.CreatedAt = Timestamp{Seconds: MinCaptureTime.Unix() - 1} }, ErrInvalid,
			"manifest.created_at 1999-12-31T23:59:59Z is before 2000-01-01T00:00:00Z"},
		{"created_at 0", std(5), func(m *Manifest) { m.CreatedAt = Timestamp{} }, ErrInvalid, "manifest.created_at 1970-01-01T00:00:00Z is before"},
		{"created_at i64::MAX", v6, func(m *Manifest) { m.CreatedAt.Seconds = math.MaxInt64 }, ErrInvalid,
			"manifest.created_at.seconds 9223372036854775807 is i64::MAX"},
		{"created_at i64::MIN", v5, func(m *Manifest) { m.CreatedAt.Seconds = math.MinInt64 }, ErrInvalid,
			"manifest.created_at.seconds -9223372036854775808 is i64::MIN"},
		{"created_at after 9999", v6, func(m *Manifest) { m.CreatedAt.Seconds = 253402300800 }, ErrInvalid,
			"manifest.created_at.seconds 253402300800 is after 9999-12-31T23:59:59Z"},
		{"created_at before year 1", v6, func(m *Manifest) { m.CreatedAt.Seconds = math.MinInt64 + 1 }, ErrInvalid,
			"manifest.created_at.seconds -9223372036854775807 is before 2000-01-01T00:00:00Z"},
		{"created_at nanos", std(5), func(m *Manifest) { m.CreatedAt.Nanos = -1 }, ErrInvalid, "manifest.created_at.nanos -1 outside 0..999999999"},
		{"v5 capture_wall_clock before 2000", v5, func(m *Manifest) { m.Contract.CaptureWallClock = Timestamp{Seconds: 946684799, Nanos: 5} }, ErrInvalid,
			"machine_contract.capture_wall_clock 1999-12-31T23:59:59.000000005Z is before 2000-01-01T00:00:00Z"},
		{"v5 capture_wall_clock i64::MAX", v5, func(m *Manifest) { m.Contract.CaptureWallClock.Seconds = math.MaxInt64 }, ErrInvalid,
			"machine_contract.capture_wall_clock.seconds 9223372036854775807 is i64::MAX"},
		{"capture_utc_ns before 2000", v6, func(m *Manifest) { m.Contract.Time.CaptureUTCNs = 0 }, ErrInvalid,
			"machine_contract.time.capture_utc_ns 1970-01-01T00:00:00Z is before 2000-01-01T00:00:00Z"},
		{"capture_utc_ns u64::MAX", v6, func(m *Manifest) { m.Contract.Time.CaptureUTCNs = math.MaxUint64 }, ErrInvalid,
			"machine_contract.time.capture_utc_ns 18446744073709551615 is u64::MAX"},
		{"capture_utc_ns i64::MAX", v6, func(m *Manifest) { m.Contract.Time.CaptureUTCNs = math.MaxInt64 }, ErrInvalid,
			"machine_contract.time.capture_utc_ns 9223372036854775807 is i64::MAX"},
		{"capture_utc_ns past int64", v6, func(m *Manifest) { m.Contract.Time.CaptureUTCNs = 1<<63 + 1 }, ErrInvalid,
			"machine_contract.time.capture_utc_ns 9223372036854775809 exceeds the int64 nanosecond range"},
		{"capture_monotonic_ns u64::MAX", v6, func(m *Manifest) { m.Contract.Time.CaptureMonotonicNs = math.MaxUint64 }, ErrInvalid,
			"machine_contract.time.capture_monotonic_ns 18446744073709551615 is u64::MAX"},
		{"capture_monotonic_ns i64::MAX", v6, func(m *Manifest) { m.Contract.Time.CaptureMonotonicNs = math.MaxInt64 }, ErrInvalid,
			"machine_contract.time.capture_monotonic_ns 9223372036854775807 is i64::MAX"},
		{"capture_monotonic_ns past int64", v6, func(m *Manifest) { m.Contract.Time.CaptureMonotonicNs = 1 << 63 }, ErrInvalid,
			"machine_contract.time.capture_monotonic_ns 9223372036854775808 exceeds the int64 nanosecond range"},
		{"capture_tsc u64::MAX", v6, func(m *Manifest) { m.Contract.Time.CaptureTSC = math.MaxUint64 }, ErrInvalid,
			"machine_contract.time.capture_tsc 18446744073709551615 is u64::MAX"},
		{"capture_tsc i64::MAX", v6, func(m *Manifest) { m.Contract.Time.CaptureTSC = math.MaxInt64 }, ErrInvalid,
			"machine_contract.time.capture_tsc 9223372036854775807 is i64::MAX"},
	}
	retired := []struct {
		field string
		set   func(c *MachineContract)
	}{
		{"capture_wall_clock (11)", func(c *MachineContract) { c.CaptureWallClock.Seconds = 1 }},
		{"tsc_frequency_hz (12)", func(c *MachineContract) { c.TSCFrequencyHz = 1 }},
		{"tsc_tolerance_ppm (13)", func(c *MachineContract) { c.TSCTolerancePPM = 1 }},
		{"cpu_contract (14)", func(c *MachineContract) { c.CPUContract = []byte{1} }},
		{"cpu_contract_sha256 (15)", func(c *MachineContract) { c.CPUContractSHA256 = []byte{1} }},
		{"clock_policy (17)", func(c *MachineContract) { c.ClockPolicy = clockPolicyAdvance }},
		{"apic_frequency_hz (20)", func(c *MachineContract) { c.APICFrequencyHz = ptr[uint64](0) }},
	}
	for _, r := range retired {
		rows = append(rows, row{"v6 retired " + r.field, v6, func(m *Manifest) { r.set(m.Contract) }, ErrInvalid, "retired version 5 fields: " + r.field})
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.base()
			tc.mutate(m)
			err := m.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func TestArtifacts(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *Manifest
		want []Artifact
	}{
		{"standard", standardManifest(5), []Artifact{{StateFileName, 5}, {MemoryFileName, 1024}}},
		{"fresh scratch", withScratch(Sample(sampleOptions(6)), "platform", "clone", false),
			[]Artifact{{StateFileName, 4096}, {MemoryFileName, 5 << 30}}},
		{"paired scratch", withScratch(Sample(sampleOptions(6)), "workload-start", "clone", true),
			[]Artifact{{StateFileName, 4096}, {MemoryFileName, 5 << 30}, {ScratchFileName, 1 << 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.m.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tc.m.Artifacts(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Artifacts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// aarch64Manifest turns an x86_64 sample into an aarch64 one: the x86_64
// devices 3..10 of §2.3 become the aarch64 variant's two pl011 UARTs and
// control console at MMIO addresses (snapshot.rs @ 96fcafb9), shutdown and
// snapshot-request move to MMIO, and the state units follow.
func aarch64Manifest(m *Manifest) *Manifest {
	mmio := func(start uint64) []DeviceRange {
		return []DeviceRange{{AddressSpace: "mmio", Start: start, Length: 0x1000}}
	}
	irq := func(v uint32) *uint32 { return &v }
	c := m.Contract
	m.Architecture = ArchAArch64
	c.Devices = append(c.Devices[:3],
		Device{StableID: "com1", StateUnitName: "com1", Kind: "pl011", Ranges: mmio(0xeffe_c000), IRQ: irq(1)},
		Device{StableID: "com2", StateUnitName: "com2", Kind: "pl011", Ranges: mmio(0xeffe_b000), IRQ: irq(2)},
		Device{StableID: "microvm-portb", StateUnitName: "microvm-portb", Kind: "control-console", Ranges: mmio(0xeffe_a000)},
		Device{StableID: "microvm-shutdown", StateUnitName: "microvm-shutdown", Kind: "shutdown", Ranges: mmio(0xeffe_9000)},
		Device{StableID: "microvm-snapshot-request", StateUnitName: "microvm-snapshot-request", Kind: "snapshot-request", Ranges: mmio(0xeffe_8000)},
	)
	for i := range c.Devices {
		c.Devices[i].Order = uint32(i)
	}
	c.StateUnitNames = []string{"partition", "vmtime", "com1", "com2", "microvm-portb", "microvm-shutdown", "microvm-snapshot-request", "time-abi"}
	return m
}

// consoleAttachment is a virtio console attachment with a listener
// endpoint (§5.3 recreate-listener).
func consoleAttachment() Attachment {
	return Attachment{StableID: "console:microvm-virtio0", Kind: "virtio-console", ReconnectPolicy: "recreate-listener",
		IdentityKind: "unix-socket", Identity: []byte("/run/console.sock")}
}

// TestValidateAt checks the one rule that needs the host's clock, at its
// boundary, for each calendar time; and that Validate's rules still apply.
func TestValidateAt(t *testing.T) {
	v5 := func() *Manifest { return Sample(sampleOptions(5)) }
	v6 := func() *Manifest { return Sample(sampleOptions(6)) }
	limit := sampleNow.Add(MaxAheadOfHost)
	past := timestampOf(limit.Add(time.Nanosecond))
	for _, tc := range []struct {
		name    string
		base    func() *Manifest
		mutate  func(m *Manifest)
		mention string // "": valid
	}{
		{"an hour old", v6, func(*Manifest) {}, ""},
		{"created_at a day ahead", v6, func(m *Manifest) { m.CreatedAt = timestampOf(limit) }, ""},
		{"created_at a day and 1ns ahead", v6, func(m *Manifest) { m.CreatedAt = past }, "manifest.created_at " + limit.Add(time.Nanosecond).Format(time.RFC3339Nano) +
			" is more than 24h0m0s ahead of the host's clock (" + sampleNow.Format(time.RFC3339Nano) + ")"},
		{"v5 capture_wall_clock a day ahead", v5, func(m *Manifest) { m.Contract.CaptureWallClock = timestampOf(limit) }, ""},
		{"v5 capture_wall_clock past a day ahead", v5, func(m *Manifest) { m.Contract.CaptureWallClock = past }, "machine_contract.capture_wall_clock " + limit.Add(time.Nanosecond).Format(time.RFC3339Nano) + " is more than 24h0m0s ahead"},
		{"capture_utc_ns a day ahead", v6, func(m *Manifest) { m.Contract.Time.CaptureUTCNs = uint64(limit.UnixNano()) }, ""},
		{"capture_utc_ns past a day ahead", v6, func(m *Manifest) { m.Contract.Time.CaptureUTCNs = uint64(limit.UnixNano()) + 1 }, "machine_contract.time.capture_utc_ns " + limit.Add(time.Nanosecond).Format(time.RFC3339Nano) + " is more than 24h0m0s ahead"},
		{"a Validate rule", v6, func(m *Manifest) { m.PageSize = 1 }, "manifest.page_size 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.base()
			tc.mutate(m)
			err := m.ValidateAt(sampleNow)
			switch {
			case tc.mention == "" && err != nil:
				t.Fatalf("ValidateAt: %v", err)
			case tc.mention != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.mention)):
				t.Fatalf("ValidateAt = %v, want ErrInvalid mentioning %q", err, tc.mention)
			}
		})
	}
}
