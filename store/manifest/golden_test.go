package manifest

import (
	"bytes"
	"encoding/hex"
	"flag"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// unhex decodes hex written with spaces and newlines, as in
// openvmm-snapshot-format.md §4.1.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// Worked examples of openvmm-snapshot-format.md §4.1.
const (
	standardV5Hex = `
08 05 12 06 08 d2 85 d8 cc 04 1a 0a 74 65 73 74 2d 30 2e 31 2e 30 20 80 08
28 02 30 80 20 3a 06 78 38 36 5f 36 34 40 05 62 14 4f 50 45 4e 56 4d 4d 5f
53 4e 41 50 53 48 4f 54 5f 56 35 00 68 01 72 12 6f 70 65 6e 76 6d 6d 2e 53
61 76 65 64 53 74 61 74 65`
	memoryRangeHex = `10 80 80 80 80 04`
	highRangeHex   = `08 80 80 80 80 10 10 80 80 80 80 04 18 80 80 80 80 0c`
	pitDeviceHex   = `0a 03 70 69 74 12 03 70 69 74 1a 03 70 69 74 20 06 2a 0a 0a 04 70 6d 69 6f 10 40 18 04 30 00`
	topology2VPHex = `08 01 10 01 18 02 20 01 2a 02 00 01`
)

func standardV5(t testing.TB) []byte { return unhex(t, standardV5Hex) }

// standardV6 is the v6 variant: byte 1 and the magic digit differ (§4.1).
func standardV6(t testing.TB) []byte {
	b := standardV5(t)
	b[1] = 0x06
	i := bytes.Index(b, []byte("SNAPSHOT_V5"))
	b[i+len("SNAPSHOT_V")] = '6'
	return b
}

// timeContractBytes is the 92-byte time contract of §4.1.
func timeContractBytes(t testing.TB) []byte {
	b := unhex(t, `08 01 10 80 ea ad e9 07 18 fa 01 20 80 84 af 5f 28 ce c2 f1 05 30 80 80 a8
b1 e3 9f e7 cb 17 38 80 9c fc 9a ca 03 42 0e 6c 69 6e 75 78 2d 62 6f 6f 74
74 69 6d 65 4a 10`)
	b = append(b, bytes.Repeat([]byte{1}, 16)...)
	b = append(b, 0x52, 0x10)
	b = append(b, bytes.Repeat([]byte{2}, 16)...)
	return append(b, 0x58, 0x03)
}

func standardManifest(version uint32) *Manifest {
	return &Manifest{
		Version:                 version,
		CreatedAt:               Timestamp{Seconds: 1234567890},
		OpenVMMVersion:          "test-0.1.0",
		MemorySizeBytes:         1024,
		VPCount:                 2,
		PageSize:                4096,
		Architecture:            "x86_64",
		StateSizeBytes:          5,
		FormatMagic:             Magic(version),
		SavedStateSchemaVersion: 1,
		SavedStateRootType:      "openvmm.SavedState",
	}
}

func goldenTimeContract() *TimeContract {
	return &TimeContract{
		TimeABIVersion:     1,
		TSCFrequencyHz:     2_100_000_000,
		TSCTolerancePPM:    250,
		APICFrequencyHz:    200_000_000,
		CaptureTSC:         12_345_678,
		CaptureUTCNs:       1_700_000_000_000_000_000,
		CaptureMonotonicNs: 123_000_000_000,
		HostClock:          "linux-boottime",
		HostID:             bytes.Repeat([]byte{1}, 16),
		HostBootID:         bytes.Repeat([]byte{2}, 16),
		CaptureGeneration:  3,
	}
}

func ptr[T any](v T) *T { return &v }

func goldenPit() *Device {
	return &Device{
		StableID: "pit", StateUnitName: "pit", Kind: "pit", Order: 6,
		Ranges: []DeviceRange{{AddressSpace: "pmio", Start: 0x40, Length: 4}},
		IRQ:    ptr[uint32](0),
	}
}
