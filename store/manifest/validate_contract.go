package manifest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// Machine-contract constants (openvmm-snapshot-format.md §2.3, §5.3).
const (
	microvmProfile         = "microvm"
	microvmABIVersion2     = 2
	microvmABIVersion3     = 3 // version 6 only (§2.6)
	bootLayoutVersion      = 2
	virtioInterruptMode    = "edge-shared-status"
	virtioStatusPageGPA    = 0x30000
	virtioStatusPageSize   = 0x1000
	clockPolicyAdvance     = "advance_by_host_downtime"
	imageSlotCapacityABI3  = 4
	sandboxSectorSize      = 512
	contractPath           = "manifest.machine_contract"
	scratchRole            = "scratch"
	maxBootActiveImageSlot = 4
)

// sandboxRoles lists the sandbox block roles in their required order.
var sandboxRoles = []string{"distro", "runtime", "custom", scratchRole}

// validateContract checks the machine contract (§5.3 for version 5, §5.4
// for version 6); Validate lists what is and is not checked.
func (m *Manifest) validateContract() error {
	c := m.Contract
	if c.MachineProfile != microvmProfile {
		return invalidf("%s.machine_profile is %q, want %q", contractPath, c.MachineProfile, microvmProfile)
	}
	if _, ok := hypervisorArchitectures[c.SourceHypervisor]; !ok {
		return invalidf("%s.source_hypervisor %q is not kvm, mshv or whp", contractPath, c.SourceHypervisor)
	}
	if c.BootLayoutVersion != bootLayoutVersion {
		return invalidf("%s.boot_layout_version is %d, want %d", contractPath, c.BootLayoutVersion, bootLayoutVersion)
	}
	if c.VirtioInterruptMode != virtioInterruptMode || c.VirtioSharedStatusPageGPA != virtioStatusPageGPA ||
		c.VirtioSharedStatusPageSize != virtioStatusPageSize {
		return invalidf("%s virtio interrupt contract is %q at %#x size %#x, want %q at %#x size %#x", contractPath,
			c.VirtioInterruptMode, c.VirtioSharedStatusPageGPA, c.VirtioSharedStatusPageSize,
			virtioInterruptMode, virtioStatusPageGPA, virtioStatusPageSize)
	}
	if err := validateCommandLine(c); err != nil {
		return err
	}
	if err := validateMemoryRanges(c.MemoryRanges, m.MemorySizeBytes); err != nil {
		return err
	}
	if err := validateTopology(&c.Topology, m.VPCount); err != nil {
		return err
	}
	if err := validateInventory(c); err != nil {
		return err
	}
	if err := validateKinds(c, m.Architecture); err != nil {
		return err
	}
	if err := validateSandboxBlocks(c.SandboxBlocks); err != nil {
		return err
	}
	if m.Version == Version5 {
		return validateV5Contract(c)
	}
	return validateV6Contract(c)
}

func validateCommandLine(c *MachineContract) error {
	if len(c.EffectiveCommandLine) >= maxCommandLine {
		return invalidf("%s.effective_command_line is %d bytes, limit %d", contractPath, len(c.EffectiveCommandLine), maxCommandLine-1)
	}
	if i := strings.IndexByte(c.EffectiveCommandLine, 0); i >= 0 {
		return invalidf("%s.effective_command_line has a NUL at byte %d", contractPath, i)
	}
	return checkDigest(contractPath+".effective_command_line_sha256", c.EffectiveCommandLineSHA256, []byte(c.EffectiveCommandLine))
}

// checkDigest requires digest to be the SHA-256 of data.
func checkDigest(name string, digest, data []byte) error {
	sum := sha256.Sum256(data)
	if !bytes.Equal(digest, sum[:]) {
		return invalidf("%s is %x, want %x (SHA-256 of %d bytes)", name, digest, sum, len(data))
	}
	return nil
}

// validateMemoryRanges applies §1.1: 1..=128 ranges, non-zero lengths, no
// u64 overflow, every file range within memory.bin, no overlap in guest or
// file space, and lengths summing to memorySize.
func validateMemoryRanges(ranges []MemoryRange, memorySize uint64) error {
	const name = contractPath + ".memory_ranges"
	if len(ranges) == 0 || len(ranges) > maxMemoryRanges {
		return invalidf("%s has %d ranges, want 1..%d", name, len(ranges), maxMemoryRanges)
	}
	var total uint64
	for i, r := range ranges {
		_, gpaCarry := bits.Add64(r.GPAStart, r.Length, 0)
		fileEnd, fileCarry := bits.Add64(r.FileOffset, r.Length, 0)
		switch {
		case r.Length == 0:
			return invalidf("%s[%d] has length 0", name, i)
		case gpaCarry != 0 || fileCarry != 0:
			return invalidf("%s[%d] {gpa %#x, file %#x, length %#x} overflows", name, i, r.GPAStart, r.FileOffset, r.Length)
		case fileEnd > memorySize:
			return invalidf("%s[%d] ends at file offset %#x beyond memory_size_bytes %#x", name, i, fileEnd, memorySize)
		}
		total += r.Length // cannot wrap: each length is at most memorySize and there are at most 128
	}
	if err := checkOverlap(name, "guest", ranges, func(r MemoryRange) uint64 { return r.GPAStart }); err != nil {
		return err
	}
	if err := checkOverlap(name, "file", ranges, func(r MemoryRange) uint64 { return r.FileOffset }); err != nil {
		return err
	}
	if total != memorySize {
		return invalidf("%s total %d bytes, memory_size_bytes %d", name, total, memorySize)
	}
	return nil
}

// checkOverlap refuses ranges that overlap in the space start selects.
func checkOverlap(name, space string, ranges []MemoryRange, start func(MemoryRange) uint64) error {
	sorted := slices.SortedFunc(slices.Values(ranges), func(a, b MemoryRange) int { return cmp.Compare(start(a), start(b)) })
	for i := 1; i < len(sorted); i++ {
		prev, next := sorted[i-1], sorted[i]
		if start(prev)+prev.Length > start(next) {
			return invalidf("%s overlap in %s space at %#x", name, space, start(next))
		}
	}
	return nil
}

// canonicalMemoryRanges is the layout the microVM writer emits (§1.1): RAM
// below 3 GiB at GPA 0, the rest at GPA 4 GiB.
func canonicalMemoryRanges(size uint64) []MemoryRange {
	const low, high = 3 << 30, 4 << 30
	ranges := []MemoryRange{{GPAStart: 0, Length: min(size, low), FileOffset: 0}}
	if size > low {
		ranges = append(ranges, MemoryRange{GPAStart: high, Length: size - low, FileOffset: low})
	}
	return ranges
}

// validateTopology requires the canonical topology of §2.3 for vp_count 1,
// 2, 4 or 8: one socket, one die, vp_count cores, one thread, APIC ids
// 0..vp_count-1.
func validateTopology(t *ProcessorTopology, vpCount uint32) error {
	if vpCount != 1 && vpCount != 2 && vpCount != 4 && vpCount != 8 {
		return invalidf("manifest.vp_count %d is not 1, 2, 4 or 8", vpCount)
	}
	want := canonicalTopology(vpCount)
	if t.Sockets != want.Sockets || t.DiesPerSocket != want.DiesPerSocket || t.CoresPerDie != want.CoresPerDie ||
		t.ThreadsPerCore != want.ThreadsPerCore || !slices.Equal(t.APICIDs, want.APICIDs) {
		return invalidf("%s.topology %+v is not canonical for %d VPs (%+v)", contractPath, *t, vpCount, want)
	}
	return nil
}

func canonicalTopology(vpCount uint32) ProcessorTopology {
	t := ProcessorTopology{Sockets: 1, DiesPerSocket: 1, CoresPerDie: vpCount, ThreadsPerCore: 1}
	for id := range vpCount {
		t.APICIDs = append(t.APICIDs, id)
	}
	return t
}

// validateInventory checks state units (1..=512, unique), devices (≤ 64,
// order == index, unique non-empty stable IDs, state units listed, ≤ 16
// ranges in pmio or mmio with non-zero length and no overflow, queue_count ==
// len(queue_max_sizes)) and attachments (≤ 64, unique non-empty stable IDs,
// identity 1..4096 bytes).
func validateInventory(c *MachineContract) error {
	units := make(map[string]bool, len(c.StateUnitNames))
	if len(c.StateUnitNames) == 0 || len(c.StateUnitNames) > maxStateUnits {
		return invalidf("%s.state_unit_names has %d names, want 1..%d", contractPath, len(c.StateUnitNames), maxStateUnits)
	}
	for i, u := range c.StateUnitNames {
		if units[u] {
			return invalidf("%s.state_unit_names[%d] %q is a duplicate", contractPath, i, u)
		}
		units[u] = true
	}
	if len(c.Devices) > maxDevices {
		return invalidf("%s.devices has %d devices, limit %d", contractPath, len(c.Devices), maxDevices)
	}
	ids := make(map[string]bool, len(c.Devices))
	for i := range c.Devices {
		d := &c.Devices[i]
		name := fmt.Sprintf("%s.devices[%d]", contractPath, i)
		switch {
		case d.Order != uint32(i):
			return invalidf("%s.order is %d, want %d", name, d.Order, i)
		case d.StableID == "":
			return invalidf("%s.stable_id is empty", name)
		case ids[d.StableID]:
			return invalidf("%s.stable_id %q is a duplicate", name, d.StableID)
		case !units[d.StateUnitName]:
			return invalidf("%s.state_unit_name %q is not in state_unit_names", name, d.StateUnitName)
		case len(d.Ranges) > maxDeviceRanges:
			return invalidf("%s.ranges has %d ranges, limit %d", name, len(d.Ranges), maxDeviceRanges)
		case d.QueueCount != uint32(len(d.QueueMaxSizes)):
			return invalidf("%s.queue_count %d differs from %d queue_max_sizes", name, d.QueueCount, len(d.QueueMaxSizes))
		}
		ids[d.StableID] = true
		for j, r := range d.Ranges {
			_, carry := bits.Add64(r.Start, r.Length, 0)
			if (r.AddressSpace != "pmio" && r.AddressSpace != "mmio") || r.Length == 0 || carry != 0 {
				return invalidf("%s.ranges[%d] {%q, %#x, %#x} needs pmio or mmio, a non-zero length and no overflow",
					name, j, r.AddressSpace, r.Start, r.Length)
			}
		}
	}
	if len(c.Attachments) > maxAttachments {
		return invalidf("%s.attachments has %d attachments, limit %d", contractPath, len(c.Attachments), maxAttachments)
	}
	clear(ids)
	for i := range c.Attachments {
		a := &c.Attachments[i]
		name := fmt.Sprintf("%s.attachments[%d]", contractPath, i)
		switch {
		case a.StableID == "":
			return invalidf("%s.stable_id is empty", name)
		case ids[a.StableID]:
			return invalidf("%s.stable_id %q is a duplicate", name, a.StableID)
		case len(a.Identity) == 0 || len(a.Identity) > maxAttachmentIdentity:
			return invalidf("%s.identity is %d bytes, want 1..%d", name, len(a.Identity), maxAttachmentIdentity)
		}
		ids[a.StableID] = true
	}
	return nil
}

// validateSandboxBlocks requires none, or 2..=4 blocks with strictly
// increasing roles ending in scratch; only the scratch block may name the
// scratch.img artifact; read_only is set on all blocks but scratch; block
// sizes are powers of two with logical ≥ 512 and physical ≥ logical; length
// is non-zero, a multiple of the logical size and a valid file length (§2.3).
func validateSandboxBlocks(blocks []SandboxBlock) error {
	if len(blocks) == 0 {
		return nil
	}
	if len(blocks) < 2 || len(blocks) > maxSandboxBlocks {
		return invalidf("%s.microvm_sandbox_blocks has %d blocks, want 0 or 2..%d", contractPath, len(blocks), maxSandboxBlocks)
	}
	last := -1
	for i := range blocks {
		b := &blocks[i]
		name := fmt.Sprintf("%s.microvm_sandbox_blocks[%d]", contractPath, i)
		role := slices.Index(sandboxRoles, b.Role)
		isScratch := b.Role == scratchRole
		switch {
		case role <= last:
			return invalidf("%s.role %q is unknown or out of order", name, b.Role)
		case isScratch != (i == len(blocks)-1):
			return invalidf("%s.role %q: the last block, and only it, must be scratch", name, b.Role)
		case b.ReadOnly == isScratch:
			return invalidf("%s.read_only is %t for role %q", name, b.ReadOnly, b.Role)
		case b.Artifact != "" && (b.Artifact != ScratchFileName || !isScratch):
			return invalidf("%s.artifact %q is not allowed for role %q", name, b.Artifact, b.Role)
		case b.LogicalBlockSize < sandboxSectorSize || bits.OnesCount32(b.LogicalBlockSize) != 1:
			return invalidf("%s.logical_block_size %d is not a power of two ≥ %d", name, b.LogicalBlockSize, sandboxSectorSize)
		case b.PhysicalBlockSize < b.LogicalBlockSize || bits.OnesCount32(b.PhysicalBlockSize) != 1:
			return invalidf("%s.physical_block_size %d is not a power of two ≥ %d", name, b.PhysicalBlockSize, b.LogicalBlockSize)
		case b.Length == 0 || b.Length%uint64(b.LogicalBlockSize) != 0 || b.Length > math.MaxInt64:
			return invalidf("%s.length %d is not a non-zero multiple of %d", name, b.Length, b.LogicalBlockSize)
		}
		last = role
	}
	return nil
}

// validateV5Contract checks the version 5 clock and CPU fields (§5.3) and
// refuses the version 6 fields 31..35.
func validateV5Contract(c *MachineContract) error {
	switch {
	case c.MicrovmABIVersion != microvmABIVersion2:
		return invalidf("%s.microvm_abi_version is %d, want %d", contractPath, c.MicrovmABIVersion, microvmABIVersion2)
	case !c.CaptureWallClock.Valid():
		return invalidf("%s.capture_wall_clock nanos %d outside 0..999999999", contractPath, c.CaptureWallClock.Nanos)
	case c.TSCFrequencyHz == 0:
		return invalidf("%s.tsc_frequency_hz is 0", contractPath)
	case c.APICFrequencyHz != nil && *c.APICFrequencyHz == 0:
		return invalidf("%s.apic_frequency_hz is present and 0", contractPath)
	case len(c.CPUContract) == 0 || len(c.CPUContract) > maxCPUContract:
		return invalidf("%s.cpu_contract is %d bytes, want 1..%d", contractPath, len(c.CPUContract), maxCPUContract)
	case c.ClockPolicy != clockPolicyAdvance:
		return invalidf("%s.clock_policy is %q, want %q", contractPath, c.ClockPolicy, clockPolicyAdvance)
	case c.Time != nil || c.CPUProfile != nil || len(c.AdditionalFilesystems) != 0 ||
		c.ImageSlotCapacity != 0 || c.BootActiveImageSlotCount != 0:
		// The transitional reader pairs these with version 6 only (§0).
		return invalidf("%s carries version 6 fields 31..35 in a version 5 manifest", contractPath)
	}
	return checkDigest(contractPath+".cpu_contract_sha256", c.CPUContractSHA256, c.CPUContract)
}

// validateV6Contract checks the version 6 rules of §5.4 and §2.6.
func validateV6Contract(c *MachineContract) error {
	switch c.MicrovmABIVersion {
	case microvmABIVersion2:
		if c.ImageSlotCapacity != 0 {
			return invalidf("%s.microvm_image_slot_capacity is %d for ABI 2, want 0", contractPath, c.ImageSlotCapacity)
		}
	case microvmABIVersion3:
		if c.ImageSlotCapacity != imageSlotCapacityABI3 || c.BootActiveImageSlotCount == 0 || c.BootActiveImageSlotCount > maxBootActiveImageSlot {
			return invalidf("%s.microvm_image_slot_capacity %d and boot_active_image_slot_count %d for ABI 3, want %d and 1..%d",
				contractPath, c.ImageSlotCapacity, c.BootActiveImageSlotCount, imageSlotCapacityABI3, maxBootActiveImageSlot)
		}
	default:
		return invalidf("%s.microvm_abi_version is %d, want %d or %d", contractPath, c.MicrovmABIVersion, microvmABIVersion2, microvmABIVersion3)
	}
	var retired []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"capture_wall_clock (11)", c.CaptureWallClock != Timestamp{}},
		{"tsc_frequency_hz (12)", c.TSCFrequencyHz != 0},
		{"tsc_tolerance_ppm (13)", c.TSCTolerancePPM != 0},
		{"cpu_contract (14)", len(c.CPUContract) != 0},
		{"cpu_contract_sha256 (15)", len(c.CPUContractSHA256) != 0},
		{"clock_policy (17)", c.ClockPolicy != ""},
		{"apic_frequency_hz (20)", c.APICFrequencyHz != nil},
	} {
		if f.set {
			retired = append(retired, f.name)
		}
	}
	if len(retired) != 0 {
		return invalidf("%s sets retired version 5 fields: %s", contractPath, strings.Join(retired, ", "))
	}
	for tok := range strings.FieldsSeq(c.EffectiveCommandLine) {
		if strings.HasPrefix(tok, "tsc_early_khz=") || strings.HasPrefix(tok, "lapic_timer_hz=") {
			return invalidf("%s.effective_command_line has clock token %q (E_CMDLINE_CLOCK_TOKEN)", contractPath, tok)
		}
	}
	if c.Time == nil {
		return invalidf("%s.time is absent", contractPath)
	}
	if c.CPUProfile == nil {
		return invalidf("%s.cpu_profile is absent", contractPath)
	}
	if err := c.Time.validate(); err != nil {
		return err
	}
	return c.CPUProfile.validate()
}
