package manifest

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// SampleOptions parameterises Sample. Zero values take the documented
// defaults.
type SampleOptions struct {
	Version            uint32    // 5 or 6; 0 means 6
	MemorySizeBytes    uint64    // memory.bin length; 0 means 128 MiB
	StateSizeBytes     uint64    // state.bin length; 0 is valid
	VPCount            uint32    // 1, 2, 4 or 8; 0 means 1
	CaptureUTC         time.Time // capture anchor and created_at; zero means MinCaptureTime
	CaptureMonotonicNs uint64    // v6 capture_monotonic_ns
	HostID, BootID     [16]byte  // v6 host_id and host_boot_id
	HostClock          string    // v6 host_clock; "" means linux-boottime
}

// Sample values (openvmm-snapshot-format.md §2.3, §3, §9).
const (
	sampleOpenVMMVersion  = "0.1.0-templatefs-sample"
	sampleCommandLine     = "console=hvc0 reboot=t panic=-1"
	sampleTSCFrequencyHz  = 2_100_000_000
	sampleCPUProfileID    = "interim.host.kvm.v1"
	sampleCPUSignature    = 0x000806F8 // CPUID.1:EAX family 6 model 0x8F stepping 8
	sampleDefaultMemory   = 128 << 20
	effectiveCPUIDAnySub  = 0xFFFF_FFFF // subleaf "any" (§3.2)
	effectiveCPUIDRecSize = 24
)

// Sample returns a microVM manifest of the given version that passes
// Validate when o is within its documented domain (options outside it give a
// manifest Validate refuses, which tests use): x86_64, 4 KiB pages, the
// canonical memory ranges and topology, the fixed x86_64 device list of
// §2.3 (11 devices) with matching state units (version 6 adds time-abi), a
// fixed command line and its digest, a KVM source, boot layout 2, ABI 2 and
// the virtio interrupt contract. Version 5 carries capture_wall_clock,
// a 2.1 GHz TSC, APIC 1 GHz, a CPU contract and the clock policy; version 6
// carries a time contract (2.1 GHz, 250 ppm, APIC 1 GHz, anchors from o,
// capture_generation 0) and an interim CPU profile. There are no sandbox
// blocks, so its capture holds exactly manifest.bin, state.bin and
// memory.bin.
func Sample(o SampleOptions) *Manifest {
	o.Version = cmp.Or(o.Version, Version6)
	o.MemorySizeBytes = cmp.Or(o.MemorySizeBytes, sampleDefaultMemory)
	o.VPCount = cmp.Or(o.VPCount, 1)
	o.HostClock = cmp.Or(o.HostClock, HostClockLinuxBoottime)
	if o.CaptureUTC.IsZero() {
		o.CaptureUTC = MinCaptureTime
	}
	cmdline := sha256.Sum256([]byte(sampleCommandLine))
	c := &MachineContract{
		MachineProfile:             microvmProfile,
		MicrovmABIVersion:          microvmABIVersion2,
		SourceHypervisor:           "kvm",
		EffectiveCommandLine:       sampleCommandLine,
		EffectiveCommandLineSHA256: cmdline[:],
		MemoryRanges:               canonicalMemoryRanges(o.MemorySizeBytes),
		Topology:                   canonicalTopology(o.VPCount),
		Devices:                    x86Devices(),
		StateUnitNames:             x86StateUnits(),
		BootLayoutVersion:          bootLayoutVersion,
		VirtioInterruptMode:        virtioInterruptMode,
		VirtioSharedStatusPageGPA:  virtioStatusPageGPA,
		VirtioSharedStatusPageSize: virtioStatusPageSize,
	}
	cpuid := sampleEffectiveCPUID()
	if o.Version == Version5 {
		apic := uint64(APICFrequencyKVM)
		sum := sha256.Sum256(cpuid)
		c.CaptureWallClock = timestampOf(o.CaptureUTC)
		c.TSCFrequencyHz = sampleTSCFrequencyHz
		c.CPUContract = cpuid
		c.CPUContractSHA256 = sum[:]
		c.ClockPolicy = clockPolicyAdvance
		c.APICFrequencyHz = &apic
	} else {
		c.StateUnitNames = append(c.StateUnitNames, "time-abi")
		c.Time = &TimeContract{
			TimeABIVersion:  TimeABIVersion,
			TSCFrequencyHz:  sampleTSCFrequencyHz,
			TSCTolerancePPM: TSCTolerancePPM,
			APICFrequencyHz: APICFrequencyKVM,
			// A guest TSC that started with the host clock: 2.1 cycles per ns.
			CaptureTSC:         o.CaptureMonotonicNs / 10 * 21,
			CaptureUTCNs:       uint64(o.CaptureUTC.UnixNano()),
			CaptureMonotonicNs: o.CaptureMonotonicNs,
			HostClock:          o.HostClock,
			HostID:             o.HostID[:],
			HostBootID:         o.BootID[:],
		}
		profile := sha256.Sum256(nil)
		sum := sha256.Sum256(cpuid)
		c.CPUProfile = &CPUProfile{
			ID:                   sampleCPUProfileID,
			SHA256:               profile[:],
			EffectiveCPUID:       cpuid,
			EffectiveCPUIDSHA256: sum[:],
			CaptureCPUSignature:  sampleCPUSignature,
		}
	}
	return &Manifest{
		Version:                 o.Version,
		CreatedAt:               timestampOf(o.CaptureUTC),
		OpenVMMVersion:          sampleOpenVMMVersion,
		MemorySizeBytes:         o.MemorySizeBytes,
		VPCount:                 o.VPCount,
		PageSize:                4096,
		Architecture:            "x86_64",
		StateSizeBytes:          o.StateSizeBytes,
		Contract:                c,
		FormatMagic:             Magic(o.Version),
		SavedStateSchemaVersion: SavedStateSchemaVersion,
		SavedStateRootType:      SavedStateRootType,
	}
}

// x86Devices is the fixed x86_64 device list of the microVM builder (§2.3).
func x86Devices() []Device {
	pmio := func(start, length uint64) DeviceRange {
		return DeviceRange{AddressSpace: "pmio", Start: start, Length: length}
	}
	mmio := func(start, length uint64) DeviceRange {
		return DeviceRange{AddressSpace: "mmio", Start: start, Length: length}
	}
	irq := func(v uint32) *uint32 { return &v }
	devices := []Device{
		{StableID: "partition", StateUnitName: "partition", Kind: "partition"},
		{StableID: "vp0", StateUnitName: "partition", Kind: "vcpu"},
		{StableID: "vmtime", StateUnitName: "vmtime", Kind: "clock"},
		{StableID: "pic", StateUnitName: "pic", Kind: "pic", Ranges: []DeviceRange{pmio(0x20, 2), pmio(0xa0, 2)}},
		{StableID: "ioapic", StateUnitName: "ioapic", Kind: "ioapic", Ranges: []DeviceRange{mmio(0xfec0_0000, 0x1000)}},
		{StableID: "lapic", StateUnitName: "partition", Kind: "lapic", Ranges: []DeviceRange{mmio(0xfee0_0000, 0x1000)}},
		{StableID: "pit", StateUnitName: "pit", Kind: "pit", Ranges: []DeviceRange{pmio(0x40, 4)}, IRQ: irq(0)},
		{StableID: "rtc", StateUnitName: "rtc", Kind: "rtc", Ranges: []DeviceRange{pmio(0x70, 2)}, IRQ: irq(8)},
		{StableID: "microvm-portb", StateUnitName: "microvm-portb", Kind: "portb", Ranges: []DeviceRange{pmio(0xe9, 2)}},
		{StableID: "microvm-shutdown", StateUnitName: "microvm-shutdown", Kind: "shutdown", Ranges: []DeviceRange{pmio(0x604, 1)}},
		{StableID: "microvm-snapshot-request", StateUnitName: "microvm-snapshot-request", Kind: "snapshot-request", Ranges: []DeviceRange{pmio(0x605, 1)}},
	}
	for i := range devices {
		devices[i].Order = uint32(i)
	}
	return devices
}

// x86StateUnits is the state-unit inventory of x86Devices, in the order
// OpenVMM's tests list it.
func x86StateUnits() []string {
	return []string{"partition", "vmtime", "pic", "ioapic", "pit", "rtc",
		"microvm-portb", "microvm-shutdown", "microvm-snapshot-request"}
}

// sampleEffectiveCPUID is one 24-byte effective CPUID record of the
// transitional layout (§3.2): leaf 1, any subleaf, EAX..EDX little-endian.
func sampleEffectiveCPUID() []byte {
	b := make([]byte, 0, effectiveCPUIDRecSize)
	for _, v := range []uint32{1, effectiveCPUIDAnySub, sampleCPUSignature, 0x0080_0800, 0xFEDA_3203, 0x1F8B_FBFF} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}
