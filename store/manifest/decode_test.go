package manifest

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestGoldenManifests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint32
		wire    []byte
		refusal string // "": Validate accepts it
	}{
		{"v5", 5, standardV5(t), ""},
		// A v6 manifest needs the machine contract, which holds the time contract.
		{"v6", 6, standardV6(t), "manifest.machine_contract is absent in a version 6 manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.wire) != 84 {
				t.Fatalf("example is %d bytes, want 84", len(tc.wire))
			}
			want := standardManifest(tc.version)
			got, err := Decode(tc.wire)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Decode = %+v\nwant %+v", got, want)
			}
			if enc := Encode(want); !bytes.Equal(enc, tc.wire) {
				t.Errorf("Encode = % x\nwant     % x", enc, tc.wire)
			}
			if enc := Encode(got); !bytes.Equal(enc, tc.wire) {
				t.Errorf("Encode(Decode(x)) = % x\nwant              % x", enc, tc.wire)
			}
			err = got.Validate()
			switch {
			case tc.refusal == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.refusal != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.refusal)):
				t.Errorf("Validate = %v, want ErrInvalid mentioning %q", err, tc.refusal)
			}
		})
	}
}

// checkGolden decodes and encodes one worked example of §4.1.
func checkGolden[T any](t *testing.T, wire []byte, want T, decode func([]byte, string, *T) error, encode func([]byte, *T) []byte) {
	t.Helper()
	var got T
	if err := decode(wire, "golden", &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decode = %+v\nwant %+v", got, want)
	}
	if enc := encode(nil, &want); !bytes.Equal(enc, wire) {
		t.Errorf("encode = % x\nwant   % x", enc, wire)
	}
	if enc := encode(nil, &got); !bytes.Equal(enc, wire) {
		t.Errorf("encode(decode(x)) = % x\nwant              % x", enc, wire)
	}
}

func TestGoldenMessages(t *testing.T) {
	byValue := func(f func([]byte, MemoryRange) []byte) func([]byte, *MemoryRange) []byte {
		return func(b []byte, r *MemoryRange) []byte { return f(b, *r) }
	}
	t.Run("memory range", func(t *testing.T) {
		checkGolden(t, unhex(t, memoryRangeHex), MemoryRange{Length: 1 << 30}, decodeMemoryRange, byValue(appendMemoryRange))
	})
	t.Run("high range", func(t *testing.T) {
		want := MemoryRange{GPAStart: 4 << 30, Length: 1 << 30, FileOffset: 3 << 30}
		checkGolden(t, unhex(t, highRangeHex), want, decodeMemoryRange, byValue(appendMemoryRange))
	})
	t.Run("pit device", func(t *testing.T) {
		checkGolden(t, unhex(t, pitDeviceHex), *goldenPit(), decodeDevice, appendDevice)
	})
	t.Run("2-VP topology", func(t *testing.T) {
		want := ProcessorTopology{Sockets: 1, DiesPerSocket: 1, CoresPerDie: 2, ThreadsPerCore: 1, APICIDs: []uint32{0, 1}}
		checkGolden(t, unhex(t, topology2VPHex), want, decodeTopology, appendTopology)
	})
	t.Run("time contract", func(t *testing.T) {
		wire := timeContractBytes(t)
		if len(wire) != 92 {
			t.Fatalf("example is %d bytes, want 92", len(wire))
		}
		checkGolden(t, wire, *goldenTimeContract(), decodeTimeContract, appendTimeContract)
	})
	t.Run("contract fields 6, 31, 32, 35", func(t *testing.T) {
		wire := unhex(t, "32 06"+memoryRangeHex+"fa 01 5c")
		wire = append(wire, timeContractBytes(t)...)
		wire = append(wire, 0x82, 0x02, 0x00, 0x98, 0x02, 0x01)
		want := MachineContract{
			MemoryRanges:             []MemoryRange{{Length: 1 << 30}},
			Time:                     goldenTimeContract(),
			CPUProfile:               &CPUProfile{},
			BootActiveImageSlotCount: 1,
		}
		checkGolden(t, wire, want, decodeContract, appendContract)
	})
}

// field builders for hand-made wire input.
func tag(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(tag(num, protowire.VarintType), v)
}

func bytesField(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(tag(num, protowire.BytesType), v)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecodeAccepts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wire  []byte
		check func(*Manifest) bool
	}{
		{"empty input is version 0", nil, func(m *Manifest) bool { return reflect.DeepEqual(m, &Manifest{}) }},
		{"unknown fields of every wire type skipped", cat(
			varintField(99, 7), bytesField(100, []byte("x")),
			protowire.AppendFixed32(tag(101, protowire.Fixed32Type), 1),
			protowire.AppendFixed64(tag(102, protowire.Fixed64Type), 1),
			varintField(1, 5),
			bytesField(11, cat(varintField(99, 1), bytesField(2000, nil))),
		), func(m *Manifest) bool { return m.Version == 5 && m.Contract != nil }},
		{"fields in reverse order", cat(varintField(6, 4096), varintField(5, 2), varintField(1, 5)),
			func(m *Manifest) bool { return m.Version == 5 && m.VPCount == 2 && m.PageSize == 4096 }},
		{"last scalar wins", cat(varintField(1, 5), varintField(1, 6), bytesField(7, []byte("a")), bytesField(7, []byte("b"))),
			func(m *Manifest) bool { return m.Version == 6 && m.Architecture == "b" }},
		{"u32 narrowing truncates", varintField(1, 1<<32|5), func(m *Manifest) bool { return m.Version == 5 }},
		{"bool is non-zero", bytesField(11, bytesField(10, varintField(3, 2))),
			func(m *Manifest) bool { return m.Contract.Attachments[0].Required }},
		{"u8 field 35 truncates", bytesField(11, varintField(35, 0x101)),
			func(m *Manifest) bool { return m.Contract.BootActiveImageSlotCount == 1 }},
		{"singular messages merge", cat(
			bytesField(2, varintField(1, 10)), bytesField(2, varintField(2, 20)),
			bytesField(11, bytesField(1, []byte("microvm"))), bytesField(11, varintField(2, 2)),
			bytesField(11, bytesField(31, varintField(1, 1))), bytesField(11, bytesField(31, varintField(11, 3))),
		), func(m *Manifest) bool {
			return m.CreatedAt == Timestamp{10, 20} && m.Contract.MachineProfile == "microvm" &&
				m.Contract.MicrovmABIVersion == 2 && reflect.DeepEqual(m.Contract.Time, &TimeContract{TimeABIVersion: 1, CaptureGeneration: 3})
		}},
		{"repeated messages append", bytesField(11, cat(bytesField(6, nil), bytesField(6, varintField(2, 1)))),
			func(m *Manifest) bool {
				return len(m.Contract.MemoryRanges) == 2 && m.Contract.MemoryRanges[1].Length == 1
			}},
		{"packed and unpacked u32 mix", bytesField(11, bytesField(7, cat(
			bytesField(5, []byte{0, 1}), varintField(5, 2), bytesField(5, nil)))),
			func(m *Manifest) bool { return reflect.DeepEqual(m.Contract.Topology.APICIDs, []uint32{0, 1, 2}) }},
		{"negative timestamp", bytesField(2, cat(varintField(1, uint64(1<<64-1)), varintField(2, uint64(1<<64-1)))),
			func(m *Manifest) bool { return m.CreatedAt == Timestamp{-1, -1} }},
		{"optional zero irq present", bytesField(11, bytesField(8, varintField(6, 0))),
			func(m *Manifest) bool { return m.Contract.Devices[0].IRQ != nil && *m.Contract.Devices[0].IRQ == 0 }},
		{"v6 drops fields 9 and 10 even when malformed", cat(varintField(1, 6), varintField(9, 1), bytesField(10, make([]byte, 33))),
			func(m *Manifest) bool { return m.StateSHA256 == nil && m.MemorySHA256 == nil }},
		{"v5 keeps field 9", cat(varintField(1, 5), bytesField(9, make([]byte, 32))),
			func(m *Manifest) bool { return len(m.StateSHA256) == 32 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.wire)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !tc.check(m) {
				t.Errorf("Decode = %+v (contract %+v)", m, m.Contract)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	longString := func(n int) []byte { return []byte(strings.Repeat("a", n)) }
	contract := func(parts ...[]byte) []byte { return bytesField(11, cat(parts...)) }
	repeated := func(num protowire.Number, n int, elem []byte) []byte {
		var b []byte
		for range n {
			b = append(b, bytesField(num, elem)...)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		wire    []byte
		want    error
		mention string
	}{
		{"too large", make([]byte, MaxManifestSize+1), ErrTooLarge, "1048577 bytes exceed the limit of 1048576"},
		{"truncated tag", []byte{0x80}, ErrTruncated, "manifest"},
		{"truncated varint", []byte{0x08, 0x80}, ErrTruncated, "field 1"},
		{"truncated bytes", []byte{0x1a, 0x05, 'a'}, ErrTruncated, "field 3"},
		{"truncated nested", contract([]byte{0x32, 0x05}), ErrTruncated, "manifest.machine_contract: field 6"},
		{"truncated packed", contract(bytesField(7, bytesField(5, []byte{0x80}))), ErrTruncated, "topology.apic_ids"},
		{"field number 0", []byte{0x00, 0x00}, ErrMalformed, "manifest"},
		{"varint over 10 bytes", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrMalformed, "field 1"},
		{"start group", tag(1, protowire.StartGroupType), ErrMalformed, "group"},
		{"end group", tag(50, protowire.EndGroupType), ErrMalformed, "group"},
		{"mesh resource wire type", []byte{0x0e}, ErrMalformed, "field 1"},
		{"version as bytes", bytesField(1, []byte{5}), ErrMalformed, "manifest.version: wire type bytes, want varint"},
		{"string as varint", varintField(7, 1), ErrMalformed, "manifest.architecture"},
		{"message as varint", varintField(11, 1), ErrMalformed, "manifest.machine_contract"},
		{"nested wrong type", contract(varintField(6, 1)), ErrMalformed, "machine_contract.memory_ranges"},
		{"packed as fixed32", contract(bytesField(7, protowire.AppendFixed32(tag(5, protowire.Fixed32Type), 0))), ErrMalformed, "apic_ids"},
		{"invalid UTF-8", bytesField(7, []byte{0xff}), ErrMalformed, "manifest.architecture: invalid UTF-8"},
		{"v5 field 9 wrong type", cat(varintField(1, 5), varintField(9, 1)), ErrMalformed, "state_sha256"},
		{"field 9 digest too long", bytesField(9, make([]byte, 33)), ErrFieldTooLarge, "33 bytes exceed the limit of 32"},
		{"129 memory ranges", contract(repeated(6, 129, nil)), ErrTooMany, "machine_contract.memory_ranges: more than 128"},
		{"65 devices", contract(repeated(8, 65, nil)), ErrTooMany, "machine_contract.devices: more than 64"},
		{"17 device ranges", contract(bytesField(8, repeated(5, 17, nil))), ErrTooMany, "devices[0].ranges: more than 16"},
		{"513 state units", contract(repeated(9, 513, nil)), ErrTooMany, "state_unit_names: more than 512"},
		{"65 attachments", contract(repeated(10, 65, nil)), ErrTooMany, "attachments: more than 64"},
		{"5 sandbox blocks", contract(repeated(21, 5, nil)), ErrTooMany, "microvm_sandbox_blocks: more than 4"},
		{"9 APIC ids packed", contract(bytesField(7, bytesField(5, make([]byte, 9)))), ErrTooMany, "apic_ids: more than 8"},
		{"9 APIC ids unpacked", contract(bytesField(7, bytes.Repeat(varintField(5, 0), 9))), ErrTooMany, "apic_ids: more than 8"},
		{"65 queue sizes", contract(bytesField(8, bytesField(10, make([]byte, 65)))), ErrTooMany, "queue_max_sizes: more than 64"},
		{"257 denied paths", contract(bytesField(19, repeated(12, 257, nil))), ErrTooMany, "denied_paths: more than 256"},
		{"command line of 64 KiB", contract(bytesField(4, longString(maxCommandLine))), ErrFieldTooLarge, "effective_command_line: 65536 bytes exceed the limit of 65535"},
		{"attachment identity 4097", contract(bytesField(10, bytesField(6, make([]byte, 4097)))), ErrFieldTooLarge, "attachments[0].identity: 4097 bytes"},
		{"string 4097", bytesField(3, longString(4097)), ErrFieldTooLarge, "manifest.openvmm_version: 4097 bytes exceed the limit of 4096"},
		{"effective CPUID over 64 KiB", contract(bytesField(32, bytesField(4, make([]byte, 64<<10+1)))), ErrFieldTooLarge, "effective_cpuid: 65537 bytes"},
		{"host id 17 bytes", contract(bytesField(31, bytesField(9, make([]byte, 17)))), ErrFieldTooLarge, "time.host_id: 17 bytes exceed the limit of 16"},
		{"MAC 7 bytes", contract(bytesField(18, bytesField(4, make([]byte, 7)))), ErrFieldTooLarge, "guest_mac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.wire)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %+v, %v; want %v", m, err, tc.want)
			}
			if m != nil {
				t.Errorf("Decode returned a manifest with error %v", err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func TestDecodeBoundsAreInclusive(t *testing.T) {
	m := &Manifest{Contract: &MachineContract{
		EffectiveCommandLine: strings.Repeat("a", maxCommandLine-1),
		MemoryRanges:         make([]MemoryRange, maxMemoryRanges),
		Devices:              make([]Device, maxDevices),
		StateUnitNames:       make([]string, maxStateUnits),
		Attachments:          []Attachment{{Identity: make([]byte, maxAttachmentIdentity)}},
		Topology:             ProcessorTopology{APICIDs: make([]uint32, maxAPICIDs)},
		SandboxBlocks:        make([]SandboxBlock, maxSandboxBlocks),
	}}
	m.Contract.Devices[0].Ranges = make([]DeviceRange, maxDeviceRanges)
	got, err := Decode(Encode(m))
	if err != nil {
		t.Fatalf("Decode at the limits: %v", err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("Decode(Encode(m)) differs from m at the limits")
	}
}

// TestTruncatedPrefixes cuts a full sample manifest at every length: no
// strict prefix may be accepted, and a cut inside a top-level field must be
// reported as truncation.
func TestTruncatedPrefixes(t *testing.T) {
	for _, version := range []uint32{5, 6} {
		wire := Encode(Sample(SampleOptions{Version: version, MemorySizeBytes: 5 << 30, VPCount: 2}))
		boundaries := map[int]bool{0: true}
		for b, off := wire, 0; len(b) > 0; {
			_, _, n := protowire.ConsumeField(b)
			off += n
			b = b[n:]
			boundaries[off] = true
		}
		for i := range len(wire) {
			m, err := Decode(wire[:i])
			if err == nil {
				if !boundaries[i] {
					t.Errorf("v%d: prefix of %d bytes cut inside a field decoded", version, i)
				}
				err = m.Validate()
			} else if !errors.Is(err, ErrTruncated) {
				t.Errorf("v%d: prefix of %d bytes: %v, want ErrTruncated", version, i, err)
			}
			if err == nil {
				t.Errorf("v%d: prefix of %d of %d bytes is accepted", version, i, len(wire))
			}
		}
	}
}
