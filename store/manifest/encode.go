package manifest

import "google.golang.org/protobuf/encoding/protowire"

// Encode encodes m as OpenVMM's writer does (openvmm-snapshot-format.md §4):
// fields in declaration order (ascending, except microvm_network, which
// writes field 9 first), zero scalars and empty strings, bytes and vectors
// omitted, optional scalars (irq, apic_frequency_hz) and optional messages
// written whenever set even if zero or empty, every element of a repeated
// field written, repeated u32 packed. Fields 9 and 10 are not written for
// version 6, whose struct no longer declares them (§2.6). The output is a
// deterministic function of m. Encode does not validate m.
func Encode(m *Manifest) []byte {
	var b []byte
	b = putVarint(b, 1, uint64(m.Version))
	b = putMessage(b, 2, appendTimestamp(nil, m.CreatedAt))
	b = putString(b, 3, m.OpenVMMVersion)
	b = putVarint(b, 4, m.MemorySizeBytes)
	b = putVarint(b, 5, uint64(m.VPCount))
	b = putVarint(b, 6, uint64(m.PageSize))
	b = putString(b, 7, m.Architecture)
	b = putVarint(b, 8, m.StateSizeBytes)
	if m.Version != 6 {
		b = putBytes(b, 9, m.StateSHA256)
		b = putBytes(b, 10, m.MemorySHA256)
	}
	if m.Contract != nil {
		b = putElement(b, 11, appendContract(nil, m.Contract))
	}
	b = putBytes(b, 12, m.FormatMagic)
	b = putVarint(b, 13, uint64(m.SavedStateSchemaVersion))
	b = putString(b, 14, m.SavedStateRootType)
	b = putString(b, 15, m.SnapshotTier)
	b = putString(b, 16, m.RestorePolicy)
	b = putVarint(b, 17, uint64(m.ConsumedConfigSections))
	return b
}

func appendTimestamp(b []byte, t Timestamp) []byte {
	// Two's complement varints: a negative value takes 10 bytes (§4).
	b = putVarint(b, 1, uint64(t.Seconds))
	return putVarint(b, 2, uint64(int64(t.Nanos)))
}

func appendContract(b []byte, c *MachineContract) []byte {
	b = putString(b, 1, c.MachineProfile)
	b = putVarint(b, 2, uint64(c.MicrovmABIVersion))
	b = putString(b, 3, c.SourceHypervisor)
	b = putString(b, 4, c.EffectiveCommandLine)
	b = putBytes(b, 5, c.EffectiveCommandLineSHA256)
	for _, r := range c.MemoryRanges {
		b = putElement(b, 6, appendMemoryRange(nil, r))
	}
	b = putMessage(b, 7, appendTopology(nil, &c.Topology))
	for i := range c.Devices {
		b = putElement(b, 8, appendDevice(nil, &c.Devices[i]))
	}
	b = putStrings(b, 9, c.StateUnitNames)
	for i := range c.Attachments {
		b = putElement(b, 10, appendAttachment(nil, &c.Attachments[i]))
	}
	b = putMessage(b, 11, appendTimestamp(nil, c.CaptureWallClock))
	b = putVarint(b, 12, c.TSCFrequencyHz)
	b = putVarint(b, 13, uint64(c.TSCTolerancePPM))
	b = putBytes(b, 14, c.CPUContract)
	b = putBytes(b, 15, c.CPUContractSHA256)
	b = putVarint(b, 16, uint64(c.BootLayoutVersion))
	b = putString(b, 17, c.ClockPolicy)
	if c.Network != nil {
		b = putElement(b, 18, appendNetwork(nil, c.Network))
	}
	if c.Filesystem != nil {
		b = putElement(b, 19, appendFilesystem(nil, c.Filesystem))
	}
	if c.APICFrequencyHz != nil {
		b = putOptional(b, 20, *c.APICFrequencyHz)
	}
	for i := range c.SandboxBlocks {
		b = putElement(b, 21, appendSandboxBlock(nil, &c.SandboxBlocks[i]))
	}
	b = putVarint(b, 22, uint64(c.FilesystemSlotVersion))
	b = putVarint(b, 23, uint64(c.BootOnlineVPCount))
	b = putString(b, 24, c.VirtioInterruptMode)
	b = putVarint(b, 25, c.VirtioSharedStatusPageGPA)
	b = putVarint(b, 26, c.VirtioSharedStatusPageSize)
	b = putVarint(b, 27, uint64(c.MemoryExpansionVersion))
	b = putVarint(b, 28, c.MemoryCapacityBytes)
	b = putVarint(b, 29, c.MemoryBlockSizeBytes)
	for _, r := range c.MemoryExpansionRanges {
		b = putElement(b, 30, appendExpansionRange(nil, r))
	}
	if c.Time != nil {
		b = putElement(b, 31, appendTimeContract(nil, c.Time))
	}
	if c.CPUProfile != nil {
		b = putElement(b, 32, appendCPUProfile(nil, c.CPUProfile))
	}
	for i := range c.AdditionalFilesystems {
		b = putElement(b, 33, appendFilesystem(nil, &c.AdditionalFilesystems[i]))
	}
	b = putVarint(b, 34, uint64(c.ImageSlotCapacity))
	// u8 on the wire (§2.6).
	return putVarint(b, 35, uint64(uint8(c.BootActiveImageSlotCount)))
}

func appendMemoryRange(b []byte, r MemoryRange) []byte {
	b = putVarint(b, 1, r.GPAStart)
	b = putVarint(b, 2, r.Length)
	return putVarint(b, 3, r.FileOffset)
}

func appendExpansionRange(b []byte, r MemoryExpansionRange) []byte {
	b = putVarint(b, 1, r.GPAStart)
	return putVarint(b, 2, r.Length)
}

func appendTopology(b []byte, t *ProcessorTopology) []byte {
	b = putVarint(b, 1, uint64(t.Sockets))
	b = putVarint(b, 2, uint64(t.DiesPerSocket))
	b = putVarint(b, 3, uint64(t.CoresPerDie))
	b = putVarint(b, 4, uint64(t.ThreadsPerCore))
	return putPacked(b, 5, t.APICIDs)
}

func appendDevice(b []byte, d *Device) []byte {
	b = putString(b, 1, d.StableID)
	b = putString(b, 2, d.StateUnitName)
	b = putString(b, 3, d.Kind)
	b = putVarint(b, 4, uint64(d.Order))
	for _, r := range d.Ranges {
		b = putElement(b, 5, appendDeviceRange(nil, r))
	}
	if d.IRQ != nil {
		b = putOptional(b, 6, uint64(*d.IRQ))
	}
	b = putString(b, 7, d.Transport)
	b = putPacked(b, 8, d.FeatureBanks)
	b = putVarint(b, 9, uint64(d.QueueCount))
	return putPacked(b, 10, d.QueueMaxSizes)
}

func appendDeviceRange(b []byte, r DeviceRange) []byte {
	b = putString(b, 1, r.AddressSpace)
	b = putVarint(b, 2, r.Start)
	return putVarint(b, 3, r.Length)
}

func appendAttachment(b []byte, a *Attachment) []byte {
	b = putString(b, 1, a.StableID)
	b = putString(b, 2, a.Kind)
	b = putBool(b, 3, a.Required)
	b = putString(b, 4, a.ReconnectPolicy)
	b = putString(b, 5, a.IdentityKind)
	b = putBytes(b, 6, a.Identity)
	b = putVarint(b, 7, a.Length)
	return putVarint(b, 8, a.ReconnectTimeoutMs)
}

func appendNetwork(b []byte, n *MicrovmNetwork) []byte {
	b = putString(b, 9, n.Profile) // declared first (§2.3)
	b = putVarint(b, 1, uint64(n.GuestIPv4))
	b = putVarint(b, 2, uint64(n.PrefixLength))
	b = putVarint(b, 3, uint64(n.GatewayIPv4))
	b = putBytes(b, 4, n.GuestMAC)
	b = putBytes(b, 5, n.GatewayMAC)
	b = putString(b, 6, n.EgressPolicyMode)
	b = putBytes(b, 7, n.EgressPolicySHA256)
	b = putBool(b, 8, n.EgressPolicyRequired)
	return putVarint(b, 10, uint64(n.EgressPolicyEncodingVersion))
}

func appendFilesystem(b []byte, fs *MicrovmFilesystem) []byte {
	b = putString(b, 1, fs.GuestMountTarget)
	b = putString(b, 2, fs.AccessMode)
	b = putString(b, 3, fs.RestoreMode)
	b = putString(b, 4, fs.Tag)
	b = putVarint(b, 5, uint64(fs.HighPriorityQueueCount))
	b = putVarint(b, 6, uint64(fs.RequestQueueCount))
	b = putVarint(b, 7, fs.SharedMemorySize)
	b = putBool(b, 8, fs.DirectIO)
	b = putVarint(b, 9, fs.EntryCacheTimeoutNs)
	b = putVarint(b, 10, fs.AttributeCacheTimeoutNs)
	b = putString(b, 11, fs.CanonicalHostPath)
	b = putStrings(b, 12, fs.DeniedPaths)
	b = putString(b, 13, fs.OwnerMode)
	b = putStrings(b, 14, fs.AllowedPaths)
	return putStrings(b, 15, fs.WritablePaths)
}

func appendSandboxBlock(b []byte, s *SandboxBlock) []byte {
	b = putString(b, 1, s.Role)
	b = putBool(b, 2, s.ReadOnly)
	b = putVarint(b, 3, s.Length)
	b = putString(b, 4, s.IdentityKind)
	b = putBytes(b, 5, s.Identity)
	b = putString(b, 6, s.Artifact)
	b = putVarint(b, 7, uint64(s.LogicalBlockSize))
	b = putVarint(b, 8, uint64(s.PhysicalBlockSize))
	return putString(b, 9, s.RestoreMode)
}

func appendTimeContract(b []byte, t *TimeContract) []byte {
	b = putVarint(b, 1, uint64(t.TimeABIVersion))
	b = putVarint(b, 2, t.TSCFrequencyHz)
	b = putVarint(b, 3, uint64(t.TSCTolerancePPM))
	b = putVarint(b, 4, t.APICFrequencyHz)
	b = putVarint(b, 5, t.CaptureTSC)
	b = putVarint(b, 6, t.CaptureUTCNs)
	b = putVarint(b, 7, t.CaptureMonotonicNs)
	b = putString(b, 8, t.HostClock)
	b = putBytes(b, 9, t.HostID)
	b = putBytes(b, 10, t.HostBootID)
	return putVarint(b, 11, uint64(t.CaptureGeneration))
}

func appendCPUProfile(b []byte, p *CPUProfile) []byte {
	b = putString(b, 1, p.ID)
	b = putBytes(b, 2, p.SHA256)
	b = putBytes(b, 3, p.Profile)
	b = putBytes(b, 4, p.EffectiveCPUID)
	b = putBytes(b, 5, p.EffectiveCPUIDSHA256)
	return putVarint(b, 6, uint64(p.CaptureCPUSignature))
}

// putVarint writes a varint field unless v is 0.
func putVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return putOptional(b, num, v)
}

// putOptional writes a varint field even when v is 0 (Option<u32/u64> Some).
func putOptional(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func putBool(b []byte, num protowire.Number, v bool) []byte {
	return putVarint(b, num, protowire.EncodeBool(v))
}

// putBytes writes a bytes field unless v is empty.
func putBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return putElement(b, num, v)
}

// putString writes a string field unless v is empty.
func putString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// putMessage writes a non-optional message field unless its encoding is
// empty (all fields default).
func putMessage(b []byte, num protowire.Number, v []byte) []byte {
	return putBytes(b, num, v)
}

// putElement writes a length-delimited field even when v is empty: one
// element of a repeated field, or a present optional message.
func putElement(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// putStrings writes one field per element, empty elements included.
func putStrings(b []byte, num protowire.Number, v []string) []byte {
	for _, s := range v {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

// putPacked writes a repeated u32 as one packed field unless v is empty.
func putPacked(b []byte, num protowire.Number, v []uint32) []byte {
	if len(v) == 0 {
		return b
	}
	size := 0
	for _, x := range v {
		size += protowire.SizeVarint(uint64(x))
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	for _, x := range v {
		b = protowire.AppendVarint(b, uint64(x))
	}
	return b
}
