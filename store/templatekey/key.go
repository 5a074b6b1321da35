// Package templatekey computes the template key: the compatibility key under
// which captures are grouped into generations. Two captures share a key when
// a clone may restore either one under the same adapter.
//
// The key is a canonical, versioned projection of small metadata, never of
// payload bytes (state.bin, memory.bin, scratch.img). It combines the capture
// Class supplied by the adapter with the invariant parts of the manifest;
// capture metadata (openvmm-snapshot-format.md §2.4) stays out.
//
// # Canonical text
//
// The canonical bytes are UTF-8 text, one "name=value\n" line per field, in
// a fixed order: the class fields, then the manifest fields in the order of
// the manifest package's types (field-number order, §2.2, §2.3, §2.6, §3).
// The same fields are always written, so a line's name fixes its type:
//
//   - strings: strconv.Quote ("x86_64"), so any byte is escaped and a value
//     never contains a newline;
//   - integers: decimal; booleans: true or false;
//   - bytes: lowercase hex, empty for none;
//   - lists of integers: [a,b,c];
//   - other lists: a "name.count=N" line, then the items as name[i]…;
//   - optional values and messages: "absent", or a "present" line followed
//     by the message's lines (optional integers print their value).
//
// Keyed from the manifest: version, format magic, memory size (configured
// guest RAM, not an artifact size), VP count, page size, architecture, saved
// state schema and root type, tier, restore policy, consumed config sections,
// and the machine contract except as listed below, or "absent" for a standard
// machine. The TSC rate (v5 field 12, v6 time field 2), tolerance and LAPIC
// rate (v5 field 20, v6 time field 4) are keyed although §2.4 calls them
// host-measured: restore requires them to match (§7). The CPU profile id,
// its digest, the effective CPUID digest and capture_cpu_signature are keyed
// for the same reason (§7.2 E_CPU_GENERATION); the v5 cpu_contract is keyed
// by its digest (field 15).
//
// Left out: created_at, openvmm_version (the VMM comes from Class.Bundle),
// state_size_bytes, the v2 state/memory digests, the v5 capture_wall_clock,
// the time contract's capture anchors (capture_tsc, capture_utc_ns,
// capture_monotonic_ns, host_clock, host_id, host_boot_id,
// capture_generation), attachment identity bytes (listener endpoints),
// sandbox block identity bytes (digests or storage generations of disk
// payloads; the identity kind is keyed), and the bytes behind a keyed
// digest (cpu_contract, CPU profile, effective CPUID).
//
// # Key ID
//
// ID = lowercase hex of SHA-256(DomainTag || 0x00 || uint32 big-endian
// EncodingVersion || canonical bytes). The tag keeps the hash apart from
// other SHA-256 uses; the NUL ends the tag; the version makes a future
// encoding produce other IDs even for equal text.
package templatekey

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"templatefs/store/manifest"
)

// EncodingVersion is the version of the canonical text and ID framing. A
// change to either, including a new keyed field, needs a new version.
const EncodingVersion = 1

// DomainTag prefixes the hashed input of every key ID (see the package doc).
const DomainTag = "templatefs/template-key"

// Key is a computed template key. The zero Key is not valid; use New.
type Key struct {
	id   string
	text string
}

// New computes the key of a capture from its class and decoded manifest. It
// returns the class's Validate error, ErrNoManifest when m is nil, or
// ErrClassMismatch when the class contradicts the manifest (checkMatch).
// The manifest is not validated here; the manifest reader does that.
func New(c *Class, m *manifest.Manifest) (Key, error) {
	if c == nil {
		return Key{}, fmt.Errorf("%w: class is nil", ErrClassInvalid)
	}
	if err := c.Validate(); err != nil {
		return Key{}, err
	}
	if m == nil {
		return Key{}, ErrNoManifest
	}
	if err := checkMatch(c, m); err != nil {
		return Key{}, err
	}
	var w writer
	w.class(c)
	w.manifest(m)
	text := w.b.String()
	return Key{id: IDOf([]byte(text)), text: text}, nil
}

// ID returns the key ID: 64 lowercase hex digits.
func (k Key) ID() string { return k.id }

// Text returns the canonical text, as served at keys/<id>/key.
func (k Key) Text() string { return k.text }

// Canonical returns a copy of the canonical bytes.
func (k Key) Canonical() []byte { return []byte(k.text) }

// IDOf returns the key ID of canonical bytes under EncodingVersion, e.g. to
// check a stored key text against its ID.
func IDOf(canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(DomainTag))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint32(nil, EncodingVersion))
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// writer builds the canonical text.
type writer struct{ b strings.Builder }

func (w *writer) line(name, value string) {
	w.b.WriteString(name)
	w.b.WriteByte('=')
	w.b.WriteString(value)
	w.b.WriteByte('\n')
}

func (w *writer) str(name, v string)          { w.line(name, strconv.Quote(v)) }
func (w *writer) num(name string, v uint64)   { w.line(name, strconv.FormatUint(v, 10)) }
func (w *writer) flag(name string, v bool)    { w.line(name, strconv.FormatBool(v)) }
func (w *writer) bytes(name string, v []byte) { w.line(name, hex.EncodeToString(v)) }

func (w *writer) nums(name string, v []uint32) {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.FormatUint(uint64(n), 10)
	}
	w.line(name, "["+strings.Join(s, ",")+"]")
}

// count writes the length line of a list and returns a func naming item i.
func (w *writer) count(name string, n int) func(i int) string {
	w.num(name+".count", uint64(n))
	return func(i int) string { return name + "[" + strconv.Itoa(i) + "]" }
}

func (w *writer) strs(name string, v []string) {
	item := w.count(name, len(v))
	for i, s := range v {
		w.str(item(i), s)
	}
}

// present writes the presence line of an optional value and reports it.
func (w *writer) present(name string, ok bool) bool {
	if ok {
		w.line(name, "present")
	} else {
		w.line(name, "absent")
	}
	return ok
}

func (w *writer) optNum(name string, v *uint64) {
	if v == nil {
		w.line(name, "absent")
		return
	}
	w.num(name, *v)
}

func (w *writer) class(c *Class) {
	w.num("class.key_encoding_version", uint64(c.KeyEncodingVersion))
	w.str("class.bundle.vmm", c.Bundle.VMM)
	w.str("class.bundle.kernel", c.Bundle.Kernel)
	w.str("class.bundle.initramfs", c.Bundle.Initramfs)
	w.str("class.bundle.guest_build", c.Bundle.GuestBuild)
	w.num("class.contracts.boot", uint64(c.Contracts.Boot))
	w.num("class.contracts.snapshot", uint64(c.Contracts.Snapshot))
	w.num("class.contracts.device_state", uint64(c.Contracts.DeviceState))
	w.num("class.contracts.time", uint64(c.Contracts.Time))
	w.num("class.contracts.restore_packet", uint64(c.Contracts.RestorePacket))
	w.num("class.contracts.control", uint64(c.Contracts.Control))
	w.num("class.contracts.activation", uint64(c.Contracts.Activation))
	w.str("class.network_policy", c.NetworkPolicy)
	w.str("class.isolation.hypervisor", c.Isolation.Hypervisor)
	w.str("class.isolation.sandbox", c.Isolation.Sandbox)
	w.num("class.isolation.vp_count_limit", uint64(c.Isolation.VPCountLimit))
}

func (w *writer) manifest(m *manifest.Manifest) {
	w.num("manifest.version", uint64(m.Version))
	w.num("manifest.memory_size_bytes", m.MemorySizeBytes)
	w.num("manifest.vp_count", uint64(m.VPCount))
	w.num("manifest.page_size", uint64(m.PageSize))
	w.str("manifest.architecture", m.Architecture)
	w.bytes("manifest.format_magic", m.FormatMagic)
	w.num("manifest.saved_state_schema_version", uint64(m.SavedStateSchemaVersion))
	w.str("manifest.saved_state_root_type", m.SavedStateRootType)
	w.str("manifest.snapshot_tier", m.SnapshotTier)
	w.str("manifest.restore_policy", m.RestorePolicy)
	w.num("manifest.consumed_config_sections", uint64(m.ConsumedConfigSections))
	if w.present("manifest.machine_contract", m.Contract != nil) {
		w.contract(m.Contract)
	}
}

func (w *writer) contract(c *manifest.MachineContract) {
	const p = "contract."
	w.str(p+"machine_profile", c.MachineProfile)
	w.num(p+"microvm_abi_version", uint64(c.MicrovmABIVersion))
	w.str(p+"source_hypervisor", c.SourceHypervisor)
	w.str(p+"effective_command_line", c.EffectiveCommandLine)
	w.bytes(p+"effective_command_line_sha256", c.EffectiveCommandLineSHA256)

	item := w.count(p+"memory_ranges", len(c.MemoryRanges))
	for i, r := range c.MemoryRanges {
		n := item(i)
		w.num(n+".gpa_start", r.GPAStart)
		w.num(n+".length", r.Length)
		w.num(n+".file_offset", r.FileOffset)
	}

	t := c.Topology
	w.num(p+"topology.sockets", uint64(t.Sockets))
	w.num(p+"topology.dies_per_socket", uint64(t.DiesPerSocket))
	w.num(p+"topology.cores_per_die", uint64(t.CoresPerDie))
	w.num(p+"topology.threads_per_core", uint64(t.ThreadsPerCore))
	w.nums(p+"topology.apic_ids", t.APICIDs)

	item = w.count(p+"devices", len(c.Devices))
	for i, d := range c.Devices {
		w.device(item(i), d)
	}
	w.strs(p+"state_unit_names", c.StateUnitNames)

	item = w.count(p+"attachments", len(c.Attachments))
	for i, a := range c.Attachments {
		n := item(i)
		w.str(n+".stable_id", a.StableID)
		w.str(n+".kind", a.Kind)
		w.flag(n+".required", a.Required)
		w.str(n+".reconnect_policy", a.ReconnectPolicy)
		w.str(n+".identity_kind", a.IdentityKind)
		w.num(n+".length", a.Length)
		w.num(n+".reconnect_timeout_ms", a.ReconnectTimeoutMs)
	}

	w.num(p+"tsc_frequency_hz", c.TSCFrequencyHz)
	w.num(p+"tsc_tolerance_ppm", uint64(c.TSCTolerancePPM))
	w.bytes(p+"cpu_contract_sha256", c.CPUContractSHA256)
	w.num(p+"boot_layout_version", uint64(c.BootLayoutVersion))
	w.str(p+"clock_policy", c.ClockPolicy)
	if w.present(p+"microvm_network", c.Network != nil) {
		w.network(p+"microvm_network", c.Network)
	}
	if w.present(p+"microvm_filesystem", c.Filesystem != nil) {
		w.filesystem(p+"microvm_filesystem", c.Filesystem)
	}
	w.optNum(p+"apic_frequency_hz", c.APICFrequencyHz)

	item = w.count(p+"microvm_sandbox_blocks", len(c.SandboxBlocks))
	for i, s := range c.SandboxBlocks {
		n := item(i)
		w.str(n+".role", s.Role)
		w.flag(n+".read_only", s.ReadOnly)
		w.num(n+".length", s.Length)
		w.str(n+".identity_kind", s.IdentityKind)
		w.str(n+".artifact", s.Artifact)
		w.num(n+".logical_block_size", uint64(s.LogicalBlockSize))
		w.num(n+".physical_block_size", uint64(s.PhysicalBlockSize))
		w.str(n+".restore_mode", s.RestoreMode)
	}

	w.num(p+"microvm_filesystem_slot_version", uint64(c.FilesystemSlotVersion))
	w.num(p+"boot_online_vp_count", uint64(c.BootOnlineVPCount))
	w.str(p+"virtio_interrupt_mode", c.VirtioInterruptMode)
	w.num(p+"virtio_shared_status_page_gpa", c.VirtioSharedStatusPageGPA)
	w.num(p+"virtio_shared_status_page_size", c.VirtioSharedStatusPageSize)
	w.num(p+"memory_expansion_version", uint64(c.MemoryExpansionVersion))
	w.num(p+"memory_capacity_bytes", c.MemoryCapacityBytes)
	w.num(p+"memory_block_size_bytes", c.MemoryBlockSizeBytes)
	item = w.count(p+"memory_expansion_ranges", len(c.MemoryExpansionRanges))
	for i, r := range c.MemoryExpansionRanges {
		n := item(i)
		w.num(n+".gpa_start", r.GPAStart)
		w.num(n+".length", r.Length)
	}

	if w.present(p+"time", c.Time != nil) {
		w.num(p+"time.time_abi_version", uint64(c.Time.TimeABIVersion))
		w.num(p+"time.tsc_frequency_hz", c.Time.TSCFrequencyHz)
		w.num(p+"time.tsc_tolerance_ppm", uint64(c.Time.TSCTolerancePPM))
		w.num(p+"time.apic_frequency_hz", c.Time.APICFrequencyHz)
	}
	if w.present(p+"cpu_profile", c.CPUProfile != nil) {
		w.str(p+"cpu_profile.id", c.CPUProfile.ID)
		w.bytes(p+"cpu_profile.sha256", c.CPUProfile.SHA256)
		w.bytes(p+"cpu_profile.effective_cpuid_sha256", c.CPUProfile.EffectiveCPUIDSHA256)
		w.num(p+"cpu_profile.capture_cpu_signature", uint64(c.CPUProfile.CaptureCPUSignature))
	}
	item = w.count(p+"microvm_additional_filesystems", len(c.AdditionalFilesystems))
	for i := range c.AdditionalFilesystems {
		w.filesystem(item(i), &c.AdditionalFilesystems[i])
	}
	w.num(p+"microvm_image_slot_capacity", uint64(c.ImageSlotCapacity))
	w.num(p+"boot_active_image_slot_count", uint64(c.BootActiveImageSlotCount))
}

func (w *writer) device(n string, d manifest.Device) {
	w.str(n+".stable_id", d.StableID)
	w.str(n+".state_unit_name", d.StateUnitName)
	w.str(n+".kind", d.Kind)
	w.num(n+".order", uint64(d.Order))
	item := w.count(n+".ranges", len(d.Ranges))
	for i, r := range d.Ranges {
		rn := item(i)
		w.str(rn+".address_space", r.AddressSpace)
		w.num(rn+".start", r.Start)
		w.num(rn+".length", r.Length)
	}
	if d.IRQ == nil {
		w.line(n+".irq", "absent")
	} else {
		w.num(n+".irq", uint64(*d.IRQ))
	}
	w.str(n+".transport", d.Transport)
	w.nums(n+".feature_banks", d.FeatureBanks)
	w.num(n+".queue_count", uint64(d.QueueCount))
	w.nums(n+".queue_max_sizes", d.QueueMaxSizes)
}

func (w *writer) network(n string, net *manifest.MicrovmNetwork) {
	w.str(n+".profile", net.Profile)
	w.num(n+".guest_ipv4", uint64(net.GuestIPv4))
	w.num(n+".prefix_length", uint64(net.PrefixLength))
	w.num(n+".gateway_ipv4", uint64(net.GatewayIPv4))
	w.bytes(n+".guest_mac", net.GuestMAC)
	w.bytes(n+".gateway_mac", net.GatewayMAC)
	w.str(n+".egress_policy_mode", net.EgressPolicyMode)
	w.bytes(n+".egress_policy_sha256", net.EgressPolicySHA256)
	w.flag(n+".egress_policy_required", net.EgressPolicyRequired)
	w.num(n+".egress_policy_encoding_version", uint64(net.EgressPolicyEncodingVersion))
}

func (w *writer) filesystem(n string, f *manifest.MicrovmFilesystem) {
	w.str(n+".guest_mount_target", f.GuestMountTarget)
	w.str(n+".access_mode", f.AccessMode)
	w.str(n+".restore_mode", f.RestoreMode)
	w.str(n+".tag", f.Tag)
	w.num(n+".high_priority_queue_count", uint64(f.HighPriorityQueueCount))
	w.num(n+".request_queue_count", uint64(f.RequestQueueCount))
	w.num(n+".shared_memory_size", f.SharedMemorySize)
	w.flag(n+".direct_io", f.DirectIO)
	w.num(n+".entry_cache_timeout_ns", f.EntryCacheTimeoutNs)
	w.num(n+".attribute_cache_timeout_ns", f.AttributeCacheTimeoutNs)
	w.str(n+".canonical_host_path", f.CanonicalHostPath)
	w.strs(n+".denied_paths", f.DeniedPaths)
	w.str(n+".owner_mode", f.OwnerMode)
	w.strs(n+".allowed_paths", f.AllowedPaths)
	w.strs(n+".writable_paths", f.WritablePaths)
}
