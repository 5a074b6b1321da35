package manifest

// Limits of the format (openvmm-snapshot-format.md §1, §3.2, §5.3). Decode
// enforces each while decoding, before appending or copying.
const (
	// MaxManifestSize is the largest manifest.bin in bytes
	// (MAX_MANIFEST_SIZE_BYTES, §1).
	MaxManifestSize = 1 << 20
	// MaxStateSize is the largest state.bin in bytes
	// (MAX_SAVED_STATE_SIZE_BYTES, §1).
	MaxStateSize = 256 << 20

	maxMemoryRanges       = 128      // MAX_MEMORY_RANGES
	maxDevices            = 64       // MAX_DEVICES
	maxDeviceRanges       = 16       // MAX_DEVICE_RANGES
	maxStateUnits         = 512      // MAX_STATE_UNITS
	maxAttachments        = 64       // MAX_ATTACHMENTS
	maxAttachmentIdentity = 4096     // MAX_ATTACHMENT_IDENTITY_BYTES
	maxCommandLine        = 65536    // MAX_COMMAND_LINE_BYTES, exclusive
	maxCPUContract        = 1 << 20  // MAX_CPU_CONTRACT_BYTES
	maxCPUProfile         = 1 << 20  // MAX_CPU_PROFILE_BYTES (§3.2)
	maxEffectiveCPUID     = 64 << 10 // MAX_EFFECTIVE_CPUID_BYTES (§3.2)
	maxSandboxBlocks      = 4        // 0 or 2..=4 blocks (§2.3)
	sha256Size            = 32       // SHA256_SIZE
	hostIDSize            = 16       // host_id and host_boot_id (§3.1)
	macSize               = 6        // guest_mac, gateway_mac (§2.3)
	maxCPUProfileIDLength = 64       // cpu_profile.id (§3.2)
)

// Limits the format leaves open; chosen here so that every repeated or
// variable-length field has a bound.
const (
	// maxAPICIDs: validation accepts only vp_count 1, 2, 4 or 8 with the
	// canonical APIC ids 0..vp_count-1 (§5.3), so more than 8 ids can never
	// form a valid manifest.
	maxAPICIDs = 8
	// maxQueues bounds queue_max_sizes; OpenVMM's virtio devices use 1 or 2
	// queues (§2.3).
	maxQueues = 64
	// maxFeatureBanks bounds feature_banks; OpenVMM writes 2 (low and high
	// 32 bits of the feature word).
	maxFeatureBanks = 64
	// maxFilesystemPaths bounds each of denied_paths, allowed_paths and
	// writable_paths (§2.6).
	maxFilesystemPaths = 256
	// maxAdditionalFilesystems bounds microvm_additional_filesystems: each
	// needs its own device, and devices are bounded by maxDevices.
	maxAdditionalFilesystems = maxDevices
	// maxExpansionRanges bounds memory_expansion_ranges like memory_ranges.
	maxExpansionRanges = maxMemoryRanges
	// maxString bounds every other string and bytes field (PATH_MAX, and the
	// attachment identity bound of §5.3).
	maxString = 4096
)
