package manifest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// fuzzSeeds are the corpus of testdata/fuzz/FuzzDecode: the worked examples
// of §4.1 and the encoded samples.
func fuzzSeeds(t testing.TB) map[string][]byte {
	paired := withScratch(Sample(sampleOptions(6)), "workload-start", "clone", true)
	return map[string][]byte{
		"standard_v5":    standardV5(t),
		"standard_v6":    standardV6(t),
		"sample_v5":      Encode(Sample(sampleOptions(5))),
		"sample_v6":      Encode(Sample(sampleOptions(6))),
		"paired_scratch": Encode(paired),
		"memory_range":   unhex(t, memoryRangeHex),
		"high_range":     unhex(t, highRangeHex),
		"pit_device":     unhex(t, pitDeviceHex),
		"topology_2vp":   unhex(t, topology2VPHex),
		"time_contract":  timeContractBytes(t),
	}
}

func corpusFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
}

// TestFuzzCorpus keeps testdata/fuzz/FuzzDecode equal to fuzzSeeds
// (-update rewrites it).
func TestFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for name, seed := range fuzzSeeds(t) {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, corpusFile(seed), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, corpusFile(seed)) {
			t.Errorf("%s is stale or missing (%v); run go test -update", path, err)
		}
	}
}

// FuzzDecode: Decode, Validate, ValidateAt and Text never panic, ValidateAt
// refuses whatever Validate refuses, and whatever Decode accepts survives
// Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil && m.ValidateAt(sampleNow) == nil {
			t.Fatalf("ValidateAt accepts what Validate refuses: %v", err)
		}
		_ = m.Text()
		again, err := Decode(Encode(m))
		if err != nil {
			t.Fatalf("Decode(Encode(m)): %v", err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("Decode(Encode(m)) = %+v\nwant %+v", again, m)
		}
	})
}
