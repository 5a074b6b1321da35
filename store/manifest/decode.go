package manifest

import (
	"cmp"
	"fmt"
)

// Decode decodes manifest.bin (openvmm-snapshot-format.md §2, §4) without
// validating it; call Validate next.
//
// It accepts what OpenVMM's decoder accepts: fields in any order, unknown
// fields skipped, packed and unpacked repeated u32, last occurrence of a
// scalar wins, occurrences of a singular message merge, integers narrowed by
// truncation. Unlike OpenVMM it enforces the limits of limits.go while
// decoding. Fields 9 and 10 (state_sha256, memory_sha256) are retired in
// version 6 (§2.6): for a version 6 manifest they are dropped, together with
// any error they caused.
//
// Errors wrap ErrTooLarge (len(b) > MaxManifestSize, checked first),
// ErrTruncated, ErrMalformed, ErrFieldTooLarge or ErrTooMany. The result
// does not alias b.
func Decode(b []byte) (*Manifest, error) {
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("manifest: %d bytes exceed the limit of %d: %w", len(b), MaxManifestSize, ErrTooLarge)
	}
	m := new(Manifest)
	const path = "manifest"
	var retiredErr error // from fields 9 and 10, reported unless version 6
	err := walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			m.Version, err = f.u32(path, "version")
		case 2:
			err = mergeMessage(f, path, "created_at", &m.CreatedAt, decodeTimestamp)
		case 3:
			m.OpenVMMVersion, err = f.str(path, "openvmm_version", maxString)
		case 4:
			m.MemorySizeBytes, err = f.varint(path, "memory_size_bytes")
		case 5:
			m.VPCount, err = f.u32(path, "vp_count")
		case 6:
			m.PageSize, err = f.u32(path, "page_size")
		case 7:
			m.Architecture, err = f.str(path, "architecture", maxString)
		case 8:
			m.StateSizeBytes, err = f.varint(path, "state_size_bytes")
		case 9, 10:
			// Retired in version 6 (§2.6): an error waits until the version is known.
			var e error
			if f.num == 9 {
				m.StateSHA256, e = f.bytes(path, "state_sha256", sha256Size)
			} else {
				m.MemorySHA256, e = f.bytes(path, "memory_sha256", sha256Size)
			}
			retiredErr = cmp.Or(retiredErr, e)
		case 11:
			if m.Contract == nil {
				m.Contract = new(MachineContract)
			}
			err = mergeMessage(f, path, "machine_contract", m.Contract, decodeContract)
		case 12:
			m.FormatMagic, err = f.bytes(path, "format_magic", maxString)
		case 13:
			m.SavedStateSchemaVersion, err = f.u32(path, "saved_state_schema_version")
		case 14:
			m.SavedStateRootType, err = f.str(path, "saved_state_root_type", maxString)
		case 15:
			m.SnapshotTier, err = f.str(path, "snapshot_tier", maxString)
		case 16:
			m.RestorePolicy, err = f.str(path, "restore_policy", maxString)
		case 17:
			m.ConsumedConfigSections, err = f.u32(path, "consumed_config_sections")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.Version == Version6 {
		m.StateSHA256, m.MemorySHA256 = nil, nil
	} else if retiredErr != nil {
		return nil, retiredErr
	}
	return m, nil
}

// mergeMessage decodes a singular message field into *v, merging with what
// earlier occurrences set (§4).
func mergeMessage[T any](f field, path, name string, v *T, decode func([]byte, string, *T) error) error {
	b, err := f.message(path, name)
	if err != nil {
		return err
	}
	return decode(b, path+"."+name, v)
}

// appendMessage decodes one element of a repeated message field, refusing
// it when dst already holds count elements.
func appendMessage[T any](dst []T, f field, path, name string, count int, decode func([]byte, string, *T) error) ([]T, error) {
	if len(dst) >= count {
		return dst, tooMany(path, name, count)
	}
	b, err := f.message(path, name)
	if err != nil {
		return dst, err
	}
	var v T
	if err := decode(b, fmt.Sprintf("%s.%s[%d]", path, name, len(dst)), &v); err != nil {
		return dst, err
	}
	return append(dst, v), nil
}

func decodeTimestamp(b []byte, path string, t *Timestamp) error {
	return walk(b, path, func(f field) error {
		var v uint64
		var err error
		switch f.num {
		case 1:
			v, err = f.varint(path, "seconds")
			t.Seconds = int64(v)
		case 2:
			v, err = f.varint(path, "nanos")
			t.Nanos = int32(v)
		}
		return err
	})
}

func decodeContract(b []byte, path string, c *MachineContract) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			c.MachineProfile, err = f.str(path, "machine_profile", maxString)
		case 2:
			c.MicrovmABIVersion, err = f.u32(path, "microvm_abi_version")
		case 3:
			c.SourceHypervisor, err = f.str(path, "source_hypervisor", maxString)
		case 4:
			c.EffectiveCommandLine, err = f.str(path, "effective_command_line", maxCommandLine-1)
		case 5:
			c.EffectiveCommandLineSHA256, err = f.bytes(path, "effective_command_line_sha256", sha256Size)
		case 6:
			c.MemoryRanges, err = appendMessage(c.MemoryRanges, f, path, "memory_ranges", maxMemoryRanges, decodeMemoryRange)
		case 7:
			err = mergeMessage(f, path, "topology", &c.Topology, decodeTopology)
		case 8:
			c.Devices, err = appendMessage(c.Devices, f, path, "devices", maxDevices, decodeDevice)
		case 9:
			c.StateUnitNames, err = f.appendString(c.StateUnitNames, path, "state_unit_names", maxStateUnits, maxString)
		case 10:
			c.Attachments, err = appendMessage(c.Attachments, f, path, "attachments", maxAttachments, decodeAttachment)
		case 11:
			err = mergeMessage(f, path, "capture_wall_clock", &c.CaptureWallClock, decodeTimestamp)
		case 12:
			c.TSCFrequencyHz, err = f.varint(path, "tsc_frequency_hz")
		case 13:
			c.TSCTolerancePPM, err = f.u32(path, "tsc_tolerance_ppm")
		case 14:
			c.CPUContract, err = f.bytes(path, "cpu_contract", maxCPUContract)
		case 15:
			c.CPUContractSHA256, err = f.bytes(path, "cpu_contract_sha256", sha256Size)
		case 16:
			c.BootLayoutVersion, err = f.u32(path, "boot_layout_version")
		case 17:
			c.ClockPolicy, err = f.str(path, "clock_policy", maxString)
		case 18:
			if c.Network == nil {
				c.Network = new(MicrovmNetwork)
			}
			err = mergeMessage(f, path, "microvm_network", c.Network, decodeNetwork)
		case 19:
			if c.Filesystem == nil {
				c.Filesystem = new(MicrovmFilesystem)
			}
			err = mergeMessage(f, path, "microvm_filesystem", c.Filesystem, decodeFilesystem)
		case 20:
			var v uint64
			if v, err = f.varint(path, "apic_frequency_hz"); err == nil {
				c.APICFrequencyHz = &v
			}
		case 21:
			c.SandboxBlocks, err = appendMessage(c.SandboxBlocks, f, path, "microvm_sandbox_blocks", maxSandboxBlocks, decodeSandboxBlock)
		case 22:
			c.FilesystemSlotVersion, err = f.u32(path, "microvm_filesystem_slot_version")
		case 23:
			c.BootOnlineVPCount, err = f.u32(path, "boot_online_vp_count")
		case 24:
			c.VirtioInterruptMode, err = f.str(path, "virtio_interrupt_mode", maxString)
		case 25:
			c.VirtioSharedStatusPageGPA, err = f.varint(path, "virtio_shared_status_page_gpa")
		case 26:
			c.VirtioSharedStatusPageSize, err = f.varint(path, "virtio_shared_status_page_size")
		case 27:
			c.MemoryExpansionVersion, err = f.u32(path, "memory_expansion_version")
		case 28:
			c.MemoryCapacityBytes, err = f.varint(path, "memory_capacity_bytes")
		case 29:
			c.MemoryBlockSizeBytes, err = f.varint(path, "memory_block_size_bytes")
		case 30:
			c.MemoryExpansionRanges, err = appendMessage(c.MemoryExpansionRanges, f, path, "memory_expansion_ranges", maxExpansionRanges, decodeExpansionRange)
		case 31:
			if c.Time == nil {
				c.Time = new(TimeContract)
			}
			err = mergeMessage(f, path, "time", c.Time, decodeTimeContract)
		case 32:
			if c.CPUProfile == nil {
				c.CPUProfile = new(CPUProfile)
			}
			err = mergeMessage(f, path, "cpu_profile", c.CPUProfile, decodeCPUProfile)
		case 33:
			c.AdditionalFilesystems, err = appendMessage(c.AdditionalFilesystems, f, path, "microvm_additional_filesystems", maxAdditionalFilesystems, decodeFilesystem)
		case 34:
			c.ImageSlotCapacity, err = f.u32(path, "microvm_image_slot_capacity")
		case 35:
			// u8 on the wire (§2.6): narrowing keeps the low 8 bits.
			var v uint64
			v, err = f.varint(path, "boot_active_image_slot_count")
			c.BootActiveImageSlotCount = uint32(uint8(v))
		}
		return err
	})
}

func decodeMemoryRange(b []byte, path string, r *MemoryRange) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			r.GPAStart, err = f.varint(path, "gpa_start")
		case 2:
			r.Length, err = f.varint(path, "length")
		case 3:
			r.FileOffset, err = f.varint(path, "file_offset")
		}
		return err
	})
}

func decodeExpansionRange(b []byte, path string, r *MemoryExpansionRange) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			r.GPAStart, err = f.varint(path, "gpa_start")
		case 2:
			r.Length, err = f.varint(path, "length")
		}
		return err
	})
}

func decodeTopology(b []byte, path string, t *ProcessorTopology) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			t.Sockets, err = f.u32(path, "sockets")
		case 2:
			t.DiesPerSocket, err = f.u32(path, "dies_per_socket")
		case 3:
			t.CoresPerDie, err = f.u32(path, "cores_per_die")
		case 4:
			t.ThreadsPerCore, err = f.u32(path, "threads_per_core")
		case 5:
			t.APICIDs, err = f.appendUint32s(t.APICIDs, path, "apic_ids", maxAPICIDs)
		}
		return err
	})
}

func decodeDeviceRange(b []byte, path string, r *DeviceRange) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			r.AddressSpace, err = f.str(path, "address_space", maxString)
		case 2:
			r.Start, err = f.varint(path, "start")
		case 3:
			r.Length, err = f.varint(path, "length")
		}
		return err
	})
}

func decodeDevice(b []byte, path string, d *Device) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			d.StableID, err = f.str(path, "stable_id", maxString)
		case 2:
			d.StateUnitName, err = f.str(path, "state_unit_name", maxString)
		case 3:
			d.Kind, err = f.str(path, "kind", maxString)
		case 4:
			d.Order, err = f.u32(path, "order")
		case 5:
			d.Ranges, err = appendMessage(d.Ranges, f, path, "ranges", maxDeviceRanges, decodeDeviceRange)
		case 6:
			var v uint32
			if v, err = f.u32(path, "irq"); err == nil {
				d.IRQ = &v
			}
		case 7:
			d.Transport, err = f.str(path, "transport", maxString)
		case 8:
			d.FeatureBanks, err = f.appendUint32s(d.FeatureBanks, path, "feature_banks", maxFeatureBanks)
		case 9:
			d.QueueCount, err = f.u32(path, "queue_count")
		case 10:
			d.QueueMaxSizes, err = f.appendUint32s(d.QueueMaxSizes, path, "queue_max_sizes", maxQueues)
		}
		return err
	})
}

func decodeAttachment(b []byte, path string, a *Attachment) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			a.StableID, err = f.str(path, "stable_id", maxString)
		case 2:
			a.Kind, err = f.str(path, "kind", maxString)
		case 3:
			a.Required, err = f.boolean(path, "required")
		case 4:
			a.ReconnectPolicy, err = f.str(path, "reconnect_policy", maxString)
		case 5:
			a.IdentityKind, err = f.str(path, "identity_kind", maxString)
		case 6:
			a.Identity, err = f.bytes(path, "identity", maxAttachmentIdentity)
		case 7:
			a.Length, err = f.varint(path, "length")
		case 8:
			a.ReconnectTimeoutMs, err = f.varint(path, "reconnect_timeout_ms")
		}
		return err
	})
}

func decodeNetwork(b []byte, path string, n *MicrovmNetwork) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			n.GuestIPv4, err = f.u32(path, "guest_ipv4")
		case 2:
			n.PrefixLength, err = f.u32(path, "prefix_length")
		case 3:
			n.GatewayIPv4, err = f.u32(path, "gateway_ipv4")
		case 4:
			n.GuestMAC, err = f.bytes(path, "guest_mac", macSize)
		case 5:
			n.GatewayMAC, err = f.bytes(path, "gateway_mac", macSize)
		case 6:
			n.EgressPolicyMode, err = f.str(path, "egress_policy_mode", maxString)
		case 7:
			n.EgressPolicySHA256, err = f.bytes(path, "egress_policy_sha256", sha256Size)
		case 8:
			n.EgressPolicyRequired, err = f.boolean(path, "egress_policy_required")
		case 9:
			n.Profile, err = f.str(path, "profile", maxString)
		case 10:
			n.EgressPolicyEncodingVersion, err = f.u32(path, "egress_policy_encoding_version")
		}
		return err
	})
}

func decodeFilesystem(b []byte, path string, fs *MicrovmFilesystem) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			fs.GuestMountTarget, err = f.str(path, "guest_mount_target", maxString)
		case 2:
			fs.AccessMode, err = f.str(path, "access_mode", maxString)
		case 3:
			fs.RestoreMode, err = f.str(path, "restore_mode", maxString)
		case 4:
			fs.Tag, err = f.str(path, "tag", maxString)
		case 5:
			fs.HighPriorityQueueCount, err = f.u32(path, "high_priority_queue_count")
		case 6:
			fs.RequestQueueCount, err = f.u32(path, "request_queue_count")
		case 7:
			fs.SharedMemorySize, err = f.varint(path, "shared_memory_size")
		case 8:
			fs.DirectIO, err = f.boolean(path, "direct_io")
		case 9:
			fs.EntryCacheTimeoutNs, err = f.varint(path, "entry_cache_timeout_ns")
		case 10:
			fs.AttributeCacheTimeoutNs, err = f.varint(path, "attribute_cache_timeout_ns")
		case 11:
			fs.CanonicalHostPath, err = f.str(path, "canonical_host_path", maxString)
		case 12:
			fs.DeniedPaths, err = f.appendString(fs.DeniedPaths, path, "denied_paths", maxFilesystemPaths, maxString)
		case 13:
			fs.OwnerMode, err = f.str(path, "owner_mode", maxString)
		case 14:
			fs.AllowedPaths, err = f.appendString(fs.AllowedPaths, path, "allowed_paths", maxFilesystemPaths, maxString)
		case 15:
			fs.WritablePaths, err = f.appendString(fs.WritablePaths, path, "writable_paths", maxFilesystemPaths, maxString)
		}
		return err
	})
}

func decodeSandboxBlock(b []byte, path string, s *SandboxBlock) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			s.Role, err = f.str(path, "role", maxString)
		case 2:
			s.ReadOnly, err = f.boolean(path, "read_only")
		case 3:
			s.Length, err = f.varint(path, "length")
		case 4:
			s.IdentityKind, err = f.str(path, "identity_kind", maxString)
		case 5:
			s.Identity, err = f.bytes(path, "identity", sha256Size)
		case 6:
			s.Artifact, err = f.str(path, "artifact", maxString)
		case 7:
			s.LogicalBlockSize, err = f.u32(path, "logical_block_size")
		case 8:
			s.PhysicalBlockSize, err = f.u32(path, "physical_block_size")
		case 9:
			s.RestoreMode, err = f.str(path, "restore_mode", maxString)
		}
		return err
	})
}

func decodeTimeContract(b []byte, path string, t *TimeContract) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			t.TimeABIVersion, err = f.u32(path, "time_abi_version")
		case 2:
			t.TSCFrequencyHz, err = f.varint(path, "tsc_frequency_hz")
		case 3:
			t.TSCTolerancePPM, err = f.u32(path, "tsc_tolerance_ppm")
		case 4:
			t.APICFrequencyHz, err = f.varint(path, "apic_frequency_hz")
		case 5:
			t.CaptureTSC, err = f.varint(path, "capture_tsc")
		case 6:
			t.CaptureUTCNs, err = f.varint(path, "capture_utc_ns")
		case 7:
			t.CaptureMonotonicNs, err = f.varint(path, "capture_monotonic_ns")
		case 8:
			t.HostClock, err = f.str(path, "host_clock", maxString)
		case 9:
			t.HostID, err = f.bytes(path, "host_id", hostIDSize)
		case 10:
			t.HostBootID, err = f.bytes(path, "host_boot_id", hostIDSize)
		case 11:
			t.CaptureGeneration, err = f.u32(path, "capture_generation")
		}
		return err
	})
}

func decodeCPUProfile(b []byte, path string, p *CPUProfile) error {
	return walk(b, path, func(f field) error {
		var err error
		switch f.num {
		case 1:
			p.ID, err = f.str(path, "id", maxString)
		case 2:
			p.SHA256, err = f.bytes(path, "sha256", sha256Size)
		case 3:
			p.Profile, err = f.bytes(path, "profile", maxCPUProfile)
		case 4:
			p.EffectiveCPUID, err = f.bytes(path, "effective_cpuid", maxEffectiveCPUID)
		case 5:
			p.EffectiveCPUIDSHA256, err = f.bytes(path, "effective_cpuid_sha256", sha256Size)
		case 6:
			p.CaptureCPUSignature, err = f.u32(path, "capture_cpu_signature")
		}
		return err
	})
}
