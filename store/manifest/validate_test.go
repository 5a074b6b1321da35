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
		{"v6 standard", std(6), func(*Manifest) {}, nil, ""},
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
