package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Text renders m as one "name: value" line per field, in field-number order
// (microvm_network in its declaration order), for the manifest file of a
// generation. Names are the format's snake_case names, dotted for nested
// messages and indexed for repeated ones (machine_contract.devices[6].irq).
// Strings are Go-quoted, so no value spans lines; digests and small bytes
// are lowercase hex; large blobs (cpu_contract, cpu_profile.profile,
// effective_cpuid) show their length and SHA-256; times are RFC 3339 UTC
// with nanoseconds; IPv4 addresses are dotted and MACs colon-separated. An
// absent optional field or message is "none", an empty list "[]" and empty
// bytes "". Fields the manifest's version does not have are left out (v5:
// contract fields 31..35; v6: manifest 9 and 10, contract 11..15, 17, 20).
// The output is a deterministic function of m.
func (m *Manifest) Text() string {
	var w textWriter
	w.num("version", uint64(m.Version))
	w.timestamp("created_at", m.CreatedAt)
	w.str("openvmm_version", m.OpenVMMVersion)
	w.num("memory_size_bytes", m.MemorySizeBytes)
	w.num("vp_count", uint64(m.VPCount))
	w.num("page_size", uint64(m.PageSize))
	w.str("architecture", m.Architecture)
	w.num("state_size_bytes", m.StateSizeBytes)
	if m.Version != Version6 {
		w.hex("state_sha256", m.StateSHA256)
		w.hex("memory_sha256", m.MemorySHA256)
	}
	if m.Contract == nil {
		w.put("machine_contract", "none")
	} else {
		w.contract("machine_contract.", m.Contract, m.Version)
	}
	w.str("format_magic", string(m.FormatMagic))
	w.num("saved_state_schema_version", uint64(m.SavedStateSchemaVersion))
	w.str("saved_state_root_type", m.SavedStateRootType)
	w.str("snapshot_tier", m.SnapshotTier)
	w.str("restore_policy", m.RestorePolicy)
	w.num("consumed_config_sections", uint64(m.ConsumedConfigSections))
	return w.b.String()
}

type textWriter struct {
	b strings.Builder
}

func (w *textWriter) put(name, value string) {
	w.b.WriteString(name)
	w.b.WriteString(": ")
	w.b.WriteString(value)
	w.b.WriteByte('\n')
}

func (w *textWriter) num(name string, v uint64) { w.put(name, strconv.FormatUint(v, 10)) }

func (w *textWriter) boolean(name string, v bool) { w.put(name, strconv.FormatBool(v)) }

func (w *textWriter) str(name, v string) { w.put(name, strconv.Quote(v)) }

func (w *textWriter) hex(name string, v []byte) {
	if len(v) == 0 {
		w.put(name, `""`)
		return
	}
	w.put(name, hex.EncodeToString(v))
}

// blob renders large bytes as their length and digest.
func (w *textWriter) blob(name string, v []byte) {
	if len(v) == 0 {
		w.put(name, `""`)
		return
	}
	sum := sha256.Sum256(v)
	w.put(name, fmt.Sprintf("%d bytes, sha256 %x", len(v), sum))
}

func (w *textWriter) optional(name string, v *uint64) {
	if v == nil {
		w.put(name, "none")
		return
	}
	w.num(name, *v)
}

func (w *textWriter) uint32s(name string, v []uint32) {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatUint(uint64(x), 10)
	}
	w.put(name, "["+strings.Join(parts, " ")+"]")
}

func (w *textWriter) strs(name string, v []string) {
	if len(v) == 0 {
		w.put(name, "[]")
	}
	for i, s := range v {
		w.str(fmt.Sprintf("%s[%d]", name, i), s)
	}
}

func (w *textWriter) timestamp(name string, t Timestamp) {
	if !t.Valid() {
		w.put(name, fmt.Sprintf("seconds %d nanos %d (invalid)", t.Seconds, t.Nanos))
		return
	}
	w.put(name, t.Time().Format(time.RFC3339Nano))
}

// unixNanos renders a u64 count of ns since the Unix epoch with its time.
func (w *textWriter) unixNanos(name string, ns uint64) {
	if int64(ns) < 0 {
		w.num(name, ns)
		return
	}
	w.put(name, fmt.Sprintf("%d (%s)", ns, time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)))
}

func (w *textWriter) ipv4(name string, v uint32) {
	w.put(name, netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String())
}

func (w *textWriter) mac(name string, v []byte) {
	if len(v) != macSize {
		w.hex(name, v)
		return
	}
	w.put(name, fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", v[0], v[1], v[2], v[3], v[4], v[5]))
}

// list renders each element with fn under name[i], or "[]" when n is 0.
func (w *textWriter) list(name string, n int, fn func(prefix string, i int)) {
	if n == 0 {
		w.put(name, "[]")
	}
	for i := range n {
		fn(fmt.Sprintf("%s[%d].", name, i), i)
	}
}

// contract renders c. Fields a version does not have are left out: the
// retired clock fields in version 6, fields 31..35 in version 5 (Validate
// requires them empty there).
func (w *textWriter) contract(p string, c *MachineContract, version uint32) {
	hasV5Fields, hasV6Fields := version != Version6, version != Version5
	w.str(p+"machine_profile", c.MachineProfile)
	w.num(p+"microvm_abi_version", uint64(c.MicrovmABIVersion))
	w.str(p+"source_hypervisor", c.SourceHypervisor)
	w.str(p+"effective_command_line", c.EffectiveCommandLine)
	w.hex(p+"effective_command_line_sha256", c.EffectiveCommandLineSHA256)
	w.list(p+"memory_ranges", len(c.MemoryRanges), func(q string, i int) {
		r := c.MemoryRanges[i]
		w.num(q+"gpa_start", r.GPAStart)
		w.num(q+"length", r.Length)
		w.num(q+"file_offset", r.FileOffset)
	})
	t := &c.Topology
	w.num(p+"topology.sockets", uint64(t.Sockets))
	w.num(p+"topology.dies_per_socket", uint64(t.DiesPerSocket))
	w.num(p+"topology.cores_per_die", uint64(t.CoresPerDie))
	w.num(p+"topology.threads_per_core", uint64(t.ThreadsPerCore))
	w.uint32s(p+"topology.apic_ids", t.APICIDs)
	w.list(p+"devices", len(c.Devices), func(q string, i int) { w.device(q, &c.Devices[i]) })
	w.strs(p+"state_unit_names", c.StateUnitNames)
	w.list(p+"attachments", len(c.Attachments), func(q string, i int) { w.attachment(q, &c.Attachments[i]) })
	if hasV5Fields {
		w.timestamp(p+"capture_wall_clock", c.CaptureWallClock)
		w.num(p+"tsc_frequency_hz", c.TSCFrequencyHz)
		w.num(p+"tsc_tolerance_ppm", uint64(c.TSCTolerancePPM))
		w.blob(p+"cpu_contract", c.CPUContract)
		w.hex(p+"cpu_contract_sha256", c.CPUContractSHA256)
	}
	w.num(p+"boot_layout_version", uint64(c.BootLayoutVersion))
	if hasV5Fields {
		w.str(p+"clock_policy", c.ClockPolicy)
	}
	if c.Network == nil {
		w.put(p+"microvm_network", "none")
	} else {
		w.network(p+"microvm_network.", c.Network)
	}
	if c.Filesystem == nil {
		w.put(p+"microvm_filesystem", "none")
	} else {
		w.filesystem(p+"microvm_filesystem.", c.Filesystem)
	}
	if hasV5Fields {
		w.optional(p+"apic_frequency_hz", c.APICFrequencyHz)
	}
	w.list(p+"microvm_sandbox_blocks", len(c.SandboxBlocks), func(q string, i int) { w.sandboxBlock(q, &c.SandboxBlocks[i]) })
	w.num(p+"microvm_filesystem_slot_version", uint64(c.FilesystemSlotVersion))
	w.num(p+"boot_online_vp_count", uint64(c.BootOnlineVPCount))
	w.str(p+"virtio_interrupt_mode", c.VirtioInterruptMode)
	w.put(p+"virtio_shared_status_page_gpa", fmt.Sprintf("%#x", c.VirtioSharedStatusPageGPA))
	w.put(p+"virtio_shared_status_page_size", fmt.Sprintf("%#x", c.VirtioSharedStatusPageSize))
	w.num(p+"memory_expansion_version", uint64(c.MemoryExpansionVersion))
	w.num(p+"memory_capacity_bytes", c.MemoryCapacityBytes)
	w.num(p+"memory_block_size_bytes", c.MemoryBlockSizeBytes)
	w.list(p+"memory_expansion_ranges", len(c.MemoryExpansionRanges), func(q string, i int) {
		w.num(q+"gpa_start", c.MemoryExpansionRanges[i].GPAStart)
		w.num(q+"length", c.MemoryExpansionRanges[i].Length)
	})
	if !hasV6Fields {
		return
	}
	if c.Time == nil {
		w.put(p+"time", "none")
	} else {
		w.timeContract(p+"time.", c.Time)
	}
	if c.CPUProfile == nil {
		w.put(p+"cpu_profile", "none")
	} else {
		w.cpuProfile(p+"cpu_profile.", c.CPUProfile)
	}
	w.list(p+"microvm_additional_filesystems", len(c.AdditionalFilesystems), func(q string, i int) {
		w.filesystem(q, &c.AdditionalFilesystems[i])
	})
	w.num(p+"microvm_image_slot_capacity", uint64(c.ImageSlotCapacity))
	w.num(p+"boot_active_image_slot_count", uint64(c.BootActiveImageSlotCount))
}

func (w *textWriter) device(p string, d *Device) {
	w.str(p+"stable_id", d.StableID)
	w.str(p+"state_unit_name", d.StateUnitName)
	w.str(p+"kind", d.Kind)
	w.num(p+"order", uint64(d.Order))
	w.list(p+"ranges", len(d.Ranges), func(q string, i int) {
		r := d.Ranges[i]
		w.str(q+"address_space", r.AddressSpace)
		w.put(q+"start", fmt.Sprintf("%#x", r.Start))
		w.put(q+"length", fmt.Sprintf("%#x", r.Length))
	})
	if d.IRQ == nil {
		w.put(p+"irq", "none")
	} else {
		w.num(p+"irq", uint64(*d.IRQ))
	}
	w.str(p+"transport", d.Transport)
	w.uint32s(p+"feature_banks", d.FeatureBanks)
	w.num(p+"queue_count", uint64(d.QueueCount))
	w.uint32s(p+"queue_max_sizes", d.QueueMaxSizes)
}

func (w *textWriter) attachment(p string, a *Attachment) {
	w.str(p+"stable_id", a.StableID)
	w.str(p+"kind", a.Kind)
	w.boolean(p+"required", a.Required)
	w.str(p+"reconnect_policy", a.ReconnectPolicy)
	w.str(p+"identity_kind", a.IdentityKind)
	w.hex(p+"identity", a.Identity)
	w.num(p+"length", a.Length)
	w.num(p+"reconnect_timeout_ms", a.ReconnectTimeoutMs)
}

func (w *textWriter) network(p string, n *MicrovmNetwork) {
	w.str(p+"profile", n.Profile)
	w.ipv4(p+"guest_ipv4", n.GuestIPv4)
	w.num(p+"prefix_length", uint64(n.PrefixLength))
	w.ipv4(p+"gateway_ipv4", n.GatewayIPv4)
	w.mac(p+"guest_mac", n.GuestMAC)
	w.mac(p+"gateway_mac", n.GatewayMAC)
	w.str(p+"egress_policy_mode", n.EgressPolicyMode)
	w.hex(p+"egress_policy_sha256", n.EgressPolicySHA256)
	w.boolean(p+"egress_policy_required", n.EgressPolicyRequired)
	w.num(p+"egress_policy_encoding_version", uint64(n.EgressPolicyEncodingVersion))
}

func (w *textWriter) filesystem(p string, fs *MicrovmFilesystem) {
	w.str(p+"guest_mount_target", fs.GuestMountTarget)
	w.str(p+"access_mode", fs.AccessMode)
	w.str(p+"restore_mode", fs.RestoreMode)
	w.str(p+"tag", fs.Tag)
	w.num(p+"high_priority_queue_count", uint64(fs.HighPriorityQueueCount))
	w.num(p+"request_queue_count", uint64(fs.RequestQueueCount))
	w.num(p+"shared_memory_size", fs.SharedMemorySize)
	w.boolean(p+"direct_io", fs.DirectIO)
	w.num(p+"entry_cache_timeout_ns", fs.EntryCacheTimeoutNs)
	w.num(p+"attribute_cache_timeout_ns", fs.AttributeCacheTimeoutNs)
	w.str(p+"canonical_host_path", fs.CanonicalHostPath)
	w.strs(p+"denied_paths", fs.DeniedPaths)
	w.str(p+"owner_mode", fs.OwnerMode)
	w.strs(p+"allowed_paths", fs.AllowedPaths)
	w.strs(p+"writable_paths", fs.WritablePaths)
}

func (w *textWriter) sandboxBlock(p string, s *SandboxBlock) {
	w.str(p+"role", s.Role)
	w.boolean(p+"read_only", s.ReadOnly)
	w.num(p+"length", s.Length)
	w.str(p+"identity_kind", s.IdentityKind)
	w.hex(p+"identity", s.Identity)
	w.str(p+"artifact", s.Artifact)
	w.num(p+"logical_block_size", uint64(s.LogicalBlockSize))
	w.num(p+"physical_block_size", uint64(s.PhysicalBlockSize))
	w.str(p+"restore_mode", s.RestoreMode)
}

func (w *textWriter) timeContract(p string, t *TimeContract) {
	w.num(p+"time_abi_version", uint64(t.TimeABIVersion))
	w.num(p+"tsc_frequency_hz", t.TSCFrequencyHz)
	w.num(p+"tsc_tolerance_ppm", uint64(t.TSCTolerancePPM))
	w.num(p+"apic_frequency_hz", t.APICFrequencyHz)
	w.num(p+"capture_tsc", t.CaptureTSC)
	w.unixNanos(p+"capture_utc_ns", t.CaptureUTCNs)
	w.num(p+"capture_monotonic_ns", t.CaptureMonotonicNs)
	w.str(p+"host_clock", t.HostClock)
	w.hex(p+"host_id", t.HostID)
	w.hex(p+"host_boot_id", t.HostBootID)
	w.num(p+"capture_generation", uint64(t.CaptureGeneration))
}

func (w *textWriter) cpuProfile(p string, c *CPUProfile) {
	w.str(p+"id", c.ID)
	w.hex(p+"sha256", c.SHA256)
	w.blob(p+"profile", c.Profile)
	w.blob(p+"effective_cpuid", c.EffectiveCPUID)
	w.hex(p+"effective_cpuid_sha256", c.EffectiveCPUIDSHA256)
	w.put(p+"capture_cpu_signature", fmt.Sprintf("0x%08x", c.CaptureCPUSignature))
}
