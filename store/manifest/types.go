package manifest

// Field numbers, names and classes follow openvmm-snapshot-format.md §2.2
// (SnapshotManifest), §2.3 (SnapshotMachineContract), §2.6 (v6 delta) and §3
// (time contract, CPU profile). Raw wire integers keep the format's name and
// unit; conversion to time.Time happens at the edge (Timestamp.Time).

// Timestamp is google.protobuf.Timestamp as mesh encodes it: field 1 seconds
// (i64, two's complement varint), field 2 nanos (i32).
type Timestamp struct {
	Seconds int64
	Nanos   int32
}

// Manifest is a decoded manifest.bin (SnapshotManifest, §2.2). Fields absent
// on the wire hold their zero value. Contract is nil for a standard machine.
type Manifest struct {
	Version                 uint32           // field 1
	CreatedAt               Timestamp        // field 2, capture metadata
	OpenVMMVersion          string           // field 3, capture metadata
	MemorySizeBytes         uint64           // field 4
	VPCount                 uint32           // field 5
	PageSize                uint32           // field 6
	Architecture            string           // field 7
	StateSizeBytes          uint64           // field 8
	StateSHA256             []byte           // field 9, v2 only; retired in v6
	MemorySHA256            []byte           // field 10, v2 only; retired in v6
	Contract                *MachineContract // field 11
	FormatMagic             []byte           // field 12, 20 bytes
	SavedStateSchemaVersion uint32           // field 13
	SavedStateRootType      string           // field 14
	SnapshotTier            string           // field 15
	RestorePolicy           string           // field 16
	ConsumedConfigSections  uint32           // field 17
}

// MachineContract is SnapshotMachineContract (§2.3, v6 additions §2.6).
type MachineContract struct {
	MachineProfile             string                 // 1
	MicrovmABIVersion          uint32                 // 2
	SourceHypervisor           string                 // 3
	EffectiveCommandLine       string                 // 4
	EffectiveCommandLineSHA256 []byte                 // 5
	MemoryRanges               []MemoryRange          // 6
	Topology                   ProcessorTopology      // 7
	Devices                    []Device               // 8
	StateUnitNames             []string               // 9
	Attachments                []Attachment           // 10
	CaptureWallClock           Timestamp              // 11, v5 time anchor; retired in v6
	TSCFrequencyHz             uint64                 // 12, retired in v6
	TSCTolerancePPM            uint32                 // 13, retired in v6
	CPUContract                []byte                 // 14, retired in v6
	CPUContractSHA256          []byte                 // 15, retired in v6
	BootLayoutVersion          uint32                 // 16 (pvh_layout_version)
	ClockPolicy                string                 // 17, retired in v6
	Network                    *MicrovmNetwork        // 18
	Filesystem                 *MicrovmFilesystem     // 19
	APICFrequencyHz            *uint64                // 20 (optional), retired in v6
	SandboxBlocks              []SandboxBlock         // 21
	FilesystemSlotVersion      uint32                 // 22
	BootOnlineVPCount          uint32                 // 23
	VirtioInterruptMode        string                 // 24
	VirtioSharedStatusPageGPA  uint64                 // 25
	VirtioSharedStatusPageSize uint64                 // 26
	MemoryExpansionVersion     uint32                 // 27
	MemoryCapacityBytes        uint64                 // 28
	MemoryBlockSizeBytes       uint64                 // 29
	MemoryExpansionRanges      []MemoryExpansionRange // 30
	Time                       *TimeContract          // 31, v6
	CPUProfile                 *CPUProfile            // 32, v6
	AdditionalFilesystems      []MicrovmFilesystem    // 33, v6
	ImageSlotCapacity          uint32                 // 34, v6
	BootActiveImageSlotCount   uint32                 // 35, v6 (u8 on the wire as varint)
}

// MemoryRange is SnapshotMemoryRange: guest [GPAStart, GPAStart+Length)
// backed by memory.bin [FileOffset, FileOffset+Length). Bytes.
type MemoryRange struct {
	GPAStart   uint64 // 1
	Length     uint64 // 2
	FileOffset uint64 // 3
}

// MemoryExpansionRange is SnapshotMemoryExpansionRange (RAM absent from memory.bin).
type MemoryExpansionRange struct {
	GPAStart uint64 // 1
	Length   uint64 // 2
}

// ProcessorTopology is SnapshotProcessorTopology.
type ProcessorTopology struct {
	Sockets        uint32   // 1
	DiesPerSocket  uint32   // 2
	CoresPerDie    uint32   // 3
	ThreadsPerCore uint32   // 4
	APICIDs        []uint32 // 5, packed
}

// DeviceRange is SnapshotDeviceRange.
type DeviceRange struct {
	AddressSpace string // 1: pmio | mmio
	Start        uint64 // 2
	Length       uint64 // 3
}

// Device is SnapshotDevice.
type Device struct {
	StableID      string        // 1
	StateUnitName string        // 2
	Kind          string        // 3
	Order         uint32        // 4
	Ranges        []DeviceRange // 5
	IRQ           *uint32       // 6 (optional)
	Transport     string        // 7
	FeatureBanks  []uint32      // 8, packed
	QueueCount    uint32        // 9
	QueueMaxSizes []uint32      // 10, packed
}

// Attachment is SnapshotAttachment.
type Attachment struct {
	StableID           string // 1
	Kind               string // 2
	Required           bool   // 3
	ReconnectPolicy    string // 4
	IdentityKind       string // 5
	Identity           []byte // 6, capture metadata for listener endpoints
	Length             uint64 // 7
	ReconnectTimeoutMs uint64 // 8
}

// MicrovmNetwork is SnapshotMicrovmNetwork. IPv4 addresses are big-endian
// integers (10.0.0.2 = 0x0A000002).
type MicrovmNetwork struct {
	Profile                     string // 9
	GuestIPv4                   uint32 // 1
	PrefixLength                uint32 // 2
	GatewayIPv4                 uint32 // 3
	GuestMAC                    []byte // 4, 6 bytes
	GatewayMAC                  []byte // 5, 6 bytes
	EgressPolicyMode            string // 6
	EgressPolicySHA256          []byte // 7
	EgressPolicyRequired        bool   // 8
	EgressPolicyEncodingVersion uint32 // 10
}

// MicrovmFilesystem is SnapshotMicrovmFilesystem (v6 adds 12..15).
type MicrovmFilesystem struct {
	GuestMountTarget        string   // 1
	AccessMode              string   // 2
	RestoreMode             string   // 3
	Tag                     string   // 4
	HighPriorityQueueCount  uint32   // 5
	RequestQueueCount       uint32   // 6
	SharedMemorySize        uint64   // 7
	DirectIO                bool     // 8
	EntryCacheTimeoutNs     uint64   // 9
	AttributeCacheTimeoutNs uint64   // 10
	CanonicalHostPath       string   // 11
	DeniedPaths             []string // 12
	OwnerMode               string   // 13
	AllowedPaths            []string // 14
	WritablePaths           []string // 15
}

// SandboxBlock is SnapshotMicrovmSandboxBlock (v6 adds 9).
type SandboxBlock struct {
	Role              string // 1
	ReadOnly          bool   // 2
	Length            uint64 // 3
	IdentityKind      string // 4
	Identity          []byte // 5
	Artifact          string // 6: "scratch.img" pairs a scratch artifact
	LogicalBlockSize  uint32 // 7
	PhysicalBlockSize uint32 // 8
	RestoreMode       string // 9, v6
}

// TimeContract is SnapshotTimeContract (contract field 31, §3.1): the v6
// capture anchors.
type TimeContract struct {
	TimeABIVersion     uint32 // 1, must be 1
	TSCFrequencyHz     uint64 // 2, F_s
	TSCTolerancePPM    uint32 // 3, must be 250
	APICFrequencyHz    uint64 // 4, L_s
	CaptureTSC         uint64 // 5, T_c (cycles)
	CaptureUTCNs       uint64 // 6, ns since Unix epoch
	CaptureMonotonicNs uint64 // 7, ns on HostClock
	HostClock          string // 8: linux-boottime | windows-interrupt-time
	HostID             []byte // 9, 16 bytes
	HostBootID         []byte // 10, 16 bytes
	CaptureGeneration  uint32 // 11, lineage counter g
}

// CPUProfile is SnapshotCpuProfile (contract field 32, §3.2).
type CPUProfile struct {
	ID                   string // 1
	SHA256               []byte // 2
	Profile              []byte // 3
	EffectiveCPUID       []byte // 4
	EffectiveCPUIDSHA256 []byte // 5
	CaptureCPUSignature  uint32 // 6
}
