package manifest

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
)

// Manifest versions Validate accepts: 5 (§5.2) and 6 (§5.4).
const (
	Version5 = 5
	Version6 = 6
)

// Values fixed by the format (openvmm-snapshot-format.md §2.2, §5.2).
const (
	// SavedStateSchemaVersion is the only saved_state_schema_version.
	SavedStateSchemaVersion = 1
	// SavedStateRootType is the only saved_state_root_type.
	SavedStateRootType = "openvmm.SavedState"
	// MinPageSize is the smallest page_size: 4 KiB, the smallest page of
	// x86_64 and aarch64 hosts (restore requires equality with the host's).
	MinPageSize = 4096
)

// Magic returns the 20-byte format_magic of a manifest version, e.g.
// "OPENVMM_SNAPSHOT_V6\x00" (§2.1). It is meaningful for versions 1..9.
func Magic(version uint32) []byte {
	return fmt.Appendf(nil, "OPENVMM_SNAPSHOT_V%d\x00", version)
}

// Validate checks m against the reader rules of openvmm-snapshot-format.md
// §5: version and magic together (§5.2, §5.4), saved-state schema and root
// type, the state.bin size bound, the legacy digest fields, the page size
// (a power of two, at least MinPageSize), the architecture (x86_64 or
// aarch64), the tier combination table (§2.5), a machine contract on every
// version 6 manifest (the time contract lives in it), and the contract's
// shape: profile, ABI and boot layout versions, hypervisor and its
// architecture, interrupt contract, command line and digest, memory ranges
// (§1.1), canonical topology, device order, unique IDs, known kinds tied to
// no other architecture, state units, attachment IDs and kinds, sandbox
// block order and geometry; for version 5 the clock and CPU contract
// fields; for version 6 the time contract and CPU profile (§3) and the
// retired fields. Last, the calendar times (created_at, capture_wall_clock,
// capture_utc_ns) must be times from MinCaptureTime on and, like the
// monotonic and TSC anchors, not u64::MAX or i64::MAX sentinels.
// ValidateAt adds the one rule that needs the host's clock.
//
// Validate does not implement the full tier and attachment policy rules of
// §5.3, which matter only to a restoring VMM: tier command-line tokens,
// attachment reconnect policies, sandbox block identities, network and
// filesystem canonical values, memory expansion and boot_online_vp_count.
//
// Errors wrap ErrUnsupportedVersion (version not 5 or 6), ErrBadMagic
// (format_magic is not Magic(version)) or ErrInvalid.
func (m *Manifest) Validate() error {
	if m.Version != Version5 && m.Version != Version6 {
		return fmt.Errorf("manifest.version %d is not supported (supported: %d, %d): %w",
			m.Version, Version5, Version6, ErrUnsupportedVersion)
	}
	if want := Magic(m.Version); !bytes.Equal(m.FormatMagic, want) {
		return fmt.Errorf("manifest.format_magic %q does not match version %d (want %q): %w",
			m.FormatMagic, m.Version, want, ErrBadMagic)
	}
	if m.SavedStateSchemaVersion != SavedStateSchemaVersion {
		return invalidf("manifest.saved_state_schema_version is %d, want %d", m.SavedStateSchemaVersion, SavedStateSchemaVersion)
	}
	if m.SavedStateRootType != SavedStateRootType {
		return invalidf("manifest.saved_state_root_type is %q, want %q", m.SavedStateRootType, SavedStateRootType)
	}
	if m.StateSizeBytes > MaxStateSize {
		return invalidf("manifest.state_size_bytes %d exceeds the limit of %d", m.StateSizeBytes, MaxStateSize)
	}
	// memory.bin is a file, so its length is an off_t.
	if m.MemorySizeBytes > math.MaxInt64 {
		return invalidf("manifest.memory_size_bytes %d exceeds the largest file length %d", m.MemorySizeBytes, int64(math.MaxInt64))
	}
	// Version 6 retired fields 9 and 10 (Decode drops them); version 5
	// requires them empty (§5.2).
	if m.Version == Version5 && (len(m.StateSHA256) != 0 || len(m.MemorySHA256) != 0) {
		return invalidf("manifest.state_sha256 (%d bytes) and memory_sha256 (%d bytes) must be empty in version 5",
			len(m.StateSHA256), len(m.MemorySHA256))
	}
	if m.PageSize < MinPageSize || bits.OnesCount32(m.PageSize) != 1 {
		return invalidf("manifest.page_size %d is not a power of two of at least %d", m.PageSize, MinPageSize)
	}
	if err := validateArchitecture(m.Architecture); err != nil {
		return err
	}
	if err := m.validateTier(); err != nil {
		return err
	}
	if m.Contract == nil && m.Version == Version6 {
		// §5.4 reads a v6 standard machine as one without a contract, but
		// then it carries no time contract, and so no anchors to restore by.
		return invalidf("manifest.machine_contract is absent in a version %d manifest", m.Version)
	}
	if m.Contract != nil {
		if err := m.validateContract(); err != nil {
			return err
		}
	}
	_, err := m.calendarTimes()
	return err
}

// tierRule is one row of the tier table of §2.5.
type tierRule struct {
	tier, policy   string
	pairedScratch  bool
	consumedConfig uint32
}

var tierRules = []tierRule{
	{"platform", "clone", false, 1},
	{"workload-start", "clone", true, 7},
	{"instance-checkpoint", "resume", true, 7},
}

// validateTier applies the tier table of §2.5 (applied to version 6 as well,
// §5.4): without sandbox blocks, snapshot_tier, restore_policy and
// consumed_config_sections are empty; with them, the triple and the scratch
// pairing match one row. The command-line token rules of §2.5 are not
// checked.
func (m *Manifest) validateTier() error {
	if m.Contract == nil || len(m.Contract.SandboxBlocks) == 0 {
		if m.SnapshotTier != "" || m.RestorePolicy != "" || m.ConsumedConfigSections != 0 {
			return invalidf("manifest.snapshot_tier %q, restore_policy %q and consumed_config_sections %d must be empty without sandbox blocks",
				m.SnapshotTier, m.RestorePolicy, m.ConsumedConfigSections)
		}
		return nil
	}
	paired := m.Contract.pairedScratch() != nil
	for _, r := range tierRules {
		if r.tier != m.SnapshotTier {
			continue
		}
		if r.policy != m.RestorePolicy || r.pairedScratch != paired || r.consumedConfig != m.ConsumedConfigSections {
			return invalidf("manifest tier %q needs restore_policy %q, paired scratch %t and consumed_config_sections %d; found %q, %t and %d",
				r.tier, r.policy, r.pairedScratch, r.consumedConfig, m.RestorePolicy, paired, m.ConsumedConfigSections)
		}
		return nil
	}
	return invalidf("manifest.snapshot_tier %q is not one of platform, workload-start, instance-checkpoint", m.SnapshotTier)
}

// pairedScratch returns the sandbox block whose artifact is scratch.img, or
// nil (§1: the capture then holds scratch.img).
func (c *MachineContract) pairedScratch() *SandboxBlock {
	for i := range c.SandboxBlocks {
		if c.SandboxBlocks[i].Artifact == ScratchFileName {
			return &c.SandboxBlocks[i]
		}
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalid)
}
