package templatekey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"templatefs/store/manifest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.key")

func sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }

// sampleManifest is the v6 manifest of `templatefs sample-capture`.
func sampleManifest() *manifest.Manifest { return manifest.Sample(manifest.SampleOptions{}) }

// netDevice is the virtio-net device of §2.3 at the given order.
func netDevice(order uint32) manifest.Device {
	return manifest.Device{
		StableID: "net:microvm0", StateUnitName: "virtio-net-3489660928", Kind: "virtio-net", Order: order,
		Ranges:    []manifest.DeviceRange{{AddressSpace: "mmio", Start: 0xd0000000, Length: 0x1000}},
		IRQ:       u32(10),
		Transport: "virtio-mmio", FeatureBanks: []uint32{0x00010020, 0x1}, QueueCount: 2,
		QueueMaxSizes: []uint32{256, 256},
	}
}

// filesystem is a virtio-fs share with the v6 path lists (§2.3, §2.6).
func filesystem() manifest.MicrovmFilesystem {
	return manifest.MicrovmFilesystem{
		GuestMountTarget: "/mnt", AccessMode: "ro", RestoreMode: "live-revalidate", Tag: "microvm",
		HighPriorityQueueCount: 1, RequestQueueCount: 1, DirectIO: true, CanonicalHostPath: "/srv/share",
		DeniedPaths: []string{"secret"}, OwnerMode: "caller", AllowedPaths: []string{"pub"},
		WritablePaths: []string{"out"},
	}
}

// fullManifest is sampleManifest with every optional value present and every
// list non-empty, v5 and v6 fields both set, so that mutating each leaf
// exercises every line of the canonical text.
func fullManifest() *manifest.Manifest {
	m := sampleManifest()
	m.StateSHA256 = sum([]byte("state"))
	m.MemorySHA256 = sum([]byte("memory"))
	m.SnapshotTier = "workload-start"
	m.RestorePolicy = "clone"
	m.ConsumedConfigSections = 7
	c := m.Contract
	c.Devices[0] = netDevice(0)
	c.Attachments = []manifest.Attachment{{
		StableID: "control", Kind: "socket", Required: true, ReconnectPolicy: "reconnect",
		IdentityKind: "unix-path", Identity: []byte("/run/vm.sock"), Length: 1, ReconnectTimeoutMs: 500,
	}}
	c.CaptureWallClock = manifest.Timestamp{Seconds: 1767225600, Nanos: 7}
	c.TSCFrequencyHz = 2_100_000_000
	c.TSCTolerancePPM = 1
	c.CPUContract = []byte{0x0a, 0x01, 0x01}
	c.CPUContractSHA256 = sum(c.CPUContract)
	c.ClockPolicy = "advance_by_host_downtime"
	c.Network = &manifest.MicrovmNetwork{
		Profile: "portable", GuestIPv4: 0x0A000002, PrefixLength: 24, GatewayIPv4: 0x0A000001,
		GuestMAC: []byte{0x02, 0, 0, 0, 0, 0x02}, GatewayMAC: []byte{0x02, 0, 0, 0, 0, 0x01},
		EgressPolicyMode: "deny-all", EgressPolicySHA256: sum(nil), EgressPolicyRequired: true,
		EgressPolicyEncodingVersion: 1,
	}
	fs := filesystem()
	c.Filesystem = &fs
	c.AdditionalFilesystems = []manifest.MicrovmFilesystem{filesystem()}
	c.APICFrequencyHz = u64(1_000_000_000)
	c.SandboxBlocks = []manifest.SandboxBlock{{
		Role: "scratch", Length: 1 << 30, IdentityKind: "sha256", Identity: sum([]byte("scratch")),
		Artifact: "scratch.img", LogicalBlockSize: 512, PhysicalBlockSize: 4096, RestoreMode: "copy-on-write",
	}}
	c.FilesystemSlotVersion = 1
	c.BootOnlineVPCount = 1
	c.MemoryExpansionVersion = 1
	c.MemoryCapacityBytes = 1 << 30
	c.MemoryBlockSizeBytes = 128 << 20
	c.MemoryExpansionRanges = []manifest.MemoryExpansionRange{{GPAStart: 256 << 20, Length: 768 << 20}}
	c.Time.CaptureGeneration = 3
	c.Time.HostID = bytes.Repeat([]byte{0xa1}, 16)
	c.CPUProfile.Profile = []byte{0x01}
	c.ImageSlotCapacity = 4
	c.BootActiveImageSlotCount = 1
	return m
}

func mustKey(t *testing.T, c Class, m *manifest.Manifest) Key {
	t.Helper()
	k, err := New(&c, m)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return k
}

// TestSampleKeyGolden pins the canonical text (testdata/<name>.key) and the
// ID of SampleClass with manifest.Sample of each version. A changed ID is a
// compatibility break: it needs a new EncodingVersion.
func TestSampleKeyGolden(t *testing.T) {
	tests := []struct {
		name    string
		version uint32
		id      string
	}{
		{"sample-v6", 6, "b132096970ca573bda67deb97e6aae8530c7d9fc01299a1c4d499e55d836efbb"},
		{"sample-v5", 5, "f168d60a9f8d4c4a350277b3097089630553c75a95453aeb42754d8d3a438d4e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := SampleClass()
			class.Contracts.Snapshot = tt.version
			k := mustKey(t, class, manifest.Sample(manifest.SampleOptions{Version: tt.version}))
			golden := filepath.Join("testdata", tt.name+".key")
			if *update {
				if err := os.WriteFile(golden, k.Canonical(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if k.Text() != string(want) {
				t.Errorf("canonical text differs from %s (-update rewrites it):\n%s", golden, k.Text())
			}
			if k.ID() != tt.id {
				t.Errorf("ID = %s, want %s", k.ID(), tt.id)
			}
		})
	}
}

// TestRecaptureSameKey: two captures of one machine, at other times on
// other hosts, with other state sizes, share a key.
func TestRecaptureSameKey(t *testing.T) {
	for _, version := range []uint32{5, 6} {
		first := manifest.Sample(manifest.SampleOptions{Version: version})
		second := manifest.Sample(manifest.SampleOptions{
			Version: version, StateSizeBytes: 4096, CaptureUTC: time.Unix(1767225600, 5),
			CaptureMonotonicNs: 3_600_000_000_000, HostID: [16]byte{1}, BootID: [16]byte{2},
			HostClock: "windows-interrupt-time",
		})
		class := SampleClass()
		class.Contracts.Snapshot = version
		if a, b := mustKey(t, class, first), mustKey(t, class, second); a.ID() != b.ID() {
			t.Errorf("v%d: recapture changed the key:\n%s\nvs\n%s", version, a.Text(), b.Text())
		}
	}
}

// TestIDFraming recomputes the ID as the package doc describes it.
func TestIDFraming(t *testing.T) {
	k := mustKey(t, SampleClass(), sampleManifest())
	in := append([]byte("templatefs/template-key\x00\x00\x00\x00\x01"), k.Text()...)
	if want := hex.EncodeToString(sum(in)); k.ID() != want {
		t.Errorf("ID = %s, want %s", k.ID(), want)
	}
	if got := IDOf(k.Canonical()); got != k.ID() {
		t.Errorf("IDOf(Canonical()) = %s, want %s", got, k.ID())
	}
}

// TestTextEscapes checks that a value cannot forge another line.
func TestTextEscapes(t *testing.T) {
	base := mustKey(t, SampleClass(), sampleManifest())
	m := sampleManifest()
	m.Contract.EffectiveCommandLine = "a\nmanifest.version=7"
	k := mustKey(t, SampleClass(), m)
	if got, want := strings.Count(k.Text(), "\n"), strings.Count(base.Text(), "\n"); got != want {
		t.Errorf("lines = %d, want %d:\n%s", got, want, k.Text())
	}
	if !strings.Contains(k.Text(), `contract.effective_command_line="a\nmanifest.version=7"`+"\n") {
		t.Errorf("command line not quoted:\n%s", k.Text())
	}
}

// perCapture lists the fields that must not change the key, by the name
// mutations gives them, with the reason.
var perCapture = map[string]string{
	"CreatedAt.Seconds":                  "§2.4 created_at",
	"CreatedAt.Nanos":                    "§2.4 created_at",
	"OpenVMMVersion":                     "§2.4 openvmm_version; the VMM is keyed from the class",
	"StateSizeBytes":                     "§2.4 artifact size",
	"StateSHA256":                        "v2 payload digest",
	"MemorySHA256":                       "v2 payload digest",
	"Contract.Attachments[0].Identity":   "§2.4 listener endpoint identity",
	"Contract.CaptureWallClock.Seconds":  "§2.4 v5 time anchor",
	"Contract.CaptureWallClock.Nanos":    "§2.4 v5 time anchor",
	"Contract.CPUContract":               "keyed by cpu_contract_sha256",
	"Contract.SandboxBlocks[0].Identity": "§2.4 scratch digest; disk payload identity",
	"Contract.Time.CaptureTSC":           "§3.1 capture anchor",
	"Contract.Time.CaptureUTCNs":         "§3.1 capture anchor",
	"Contract.Time.CaptureMonotonicNs":   "§3.1 capture anchor",
	"Contract.Time.HostClock":            "§3.1 capture anchor (clock kind)",
	"Contract.Time.HostID":               "§3.1 capture anchor",
	"Contract.Time.HostBootID":           "§3.1 capture anchor",
	"Contract.Time.CaptureGeneration":    "§3.1 lineage counter",
	"Contract.CPUProfile.Profile":        "keyed by cpu_profile.sha256",
	"Contract.CPUProfile.EffectiveCPUID": "keyed by effective_cpuid_sha256",
}

// classMatched lists the manifest fields New requires the class to agree
// with (checkMatch), by mutation name, with the class field that follows a
// mutation so that the pair stays consistent.
var classMatched = map[string]func(c *Class, m *manifest.Manifest){
	"Version":                      func(c *Class, m *manifest.Manifest) { c.Contracts.Snapshot = m.Version },
	"Contract.SourceHypervisor":    func(c *Class, m *manifest.Manifest) { c.Isolation.Hypervisor = m.Contract.SourceHypervisor },
	"Contract.Time.TimeABIVersion": func(c *Class, m *manifest.Manifest) { c.Contracts.Time = m.Contract.Time.TimeABIVersion },
}

// manifestMatched is classMatched seen from the class: the manifest field
// that follows a mutation of each class field.
var manifestMatched = map[string]func(c *Class, m *manifest.Manifest){
	"Contracts.Snapshot":   func(c *Class, m *manifest.Manifest) { m.Version = c.Contracts.Snapshot },
	"Isolation.Hypervisor": func(c *Class, m *manifest.Manifest) { m.Contract.SourceHypervisor = c.Isolation.Hypervisor },
	"Contracts.Time":       func(c *Class, m *manifest.Manifest) { m.Contract.Time.TimeABIVersion = c.Contracts.Time },
}

// textLines returns the canonical lines of k whose name starts (class
// true) or does not start with "class.".
func textLines(k Key, class bool) string {
	var out []string
	for line := range strings.Lines(k.Text()) {
		if strings.HasPrefix(line, "class.") == class {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// TestManifestFields mutates every field of fullManifest, one at a time:
// keyed fields must change the manifest lines of the canonical text (and
// so the ID), perCapture fields must not change the ID. A field the class
// must match (classMatched) moves its class field too.
func TestManifestFields(t *testing.T) {
	baseKey := mustKey(t, SampleClass(), fullManifest())
	base, baseLines := baseKey.ID(), textLines(baseKey, false)
	seen := map[string]bool{}
	for _, mu := range mutations(t, reflect.ValueOf(fullManifest()).Elem(), "", nil) {
		_, excluded := perCapture[mu.name]
		seen[mu.name] = true
		t.Run(mu.name, func(t *testing.T) {
			m := fullManifest()
			mu.apply(reflect.ValueOf(m).Elem())
			class := SampleClass()
			if follow, ok := classMatched[mu.name]; ok {
				follow(&class, m)
			}
			k := mustKey(t, class, m)
			if excluded && k.ID() != base {
				t.Errorf("per-capture field (%s) changed the key", perCapture[mu.name])
			}
			if !excluded && (k.ID() == base || textLines(k, false) == baseLines) {
				t.Errorf("keyed field did not change the key's manifest lines")
			}
		})
	}
	for name := range classMatched {
		if !seen[name] {
			t.Errorf("classMatched names %q, which is not a manifest field", name)
		}
	}
	for name := range perCapture {
		if !seen[name] {
			t.Errorf("perCapture names %q, which is not a manifest field", name)
		}
	}
}

// TestClassFields mutates every class field: each must change the class
// lines of the canonical text (and so the ID). A field the manifest must
// match (manifestMatched) moves its manifest field too.
// key_encoding_version is not mutated; New refuses other values
// (TestNewRefuses).
func TestClassFields(t *testing.T) {
	baseKey := mustKey(t, SampleClass(), sampleManifest())
	base, baseLines := baseKey.ID(), textLines(baseKey, true)
	seen := map[string]bool{}
	for _, mu := range mutations(t, reflect.ValueOf(SampleClass()), "", nil) {
		seen[mu.name] = true
		if mu.name == "KeyEncodingVersion" {
			continue
		}
		t.Run(mu.name, func(t *testing.T) {
			c, m := SampleClass(), sampleManifest()
			mu.apply(reflect.ValueOf(&c).Elem())
			if follow, ok := manifestMatched[mu.name]; ok {
				follow(&c, m)
			}
			if k := mustKey(t, c, m); k.ID() == base || textLines(k, true) == baseLines {
				t.Errorf("keyed field did not change the key's class lines")
			}
		})
	}
	for name := range manifestMatched {
		if !seen[name] {
			t.Errorf("manifestMatched names %q, which is not a class field", name)
		}
	}
}

// TestNewRefusesMismatch: a class that contradicts its manifest is
// refused, naming both fields and both values.
func TestNewRefusesMismatch(t *testing.T) {
	tests := []struct {
		name    string
		class   func(c *Class)
		m       func(m *manifest.Manifest)
		mention string // "": accepted
	}{
		{"sample", func(*Class) {}, func(*manifest.Manifest) {}, ""},
		{"snapshot contract 5 on a v6 manifest", func(c *Class) { c.Contracts.Snapshot = 5 }, func(*manifest.Manifest) {},
			"class contracts.snapshot is 5 but manifest.version is 6"},
		{"snapshot contract 6 on a v5 manifest", func(*Class) {}, func(m *manifest.Manifest) { *m = *manifest.Sample(manifest.SampleOptions{Version: 5}) },
			"class contracts.snapshot is 6 but manifest.version is 5"},
		{"hypervisor whp on a kvm capture", func(c *Class) { c.Isolation.Hypervisor = "whp" }, func(*manifest.Manifest) {},
			`class isolation.hypervisor is "whp" but manifest.machine_contract.source_hypervisor is "kvm"`},
		{"hypervisor kvm on an mshv capture", func(*Class) {}, func(m *manifest.Manifest) { m.Contract.SourceHypervisor = "mshv" },
			`class isolation.hypervisor is "kvm" but manifest.machine_contract.source_hypervisor is "mshv"`},
		{"time contract 2 on time ABI 1", func(c *Class) { c.Contracts.Time = 2 }, func(*manifest.Manifest) {},
			"class contracts.time is 2 but manifest.machine_contract.time.time_abi_version is 1"},
		{"standard machine: no hypervisor to match", func(c *Class) { c.Isolation.Hypervisor = "whp" }, func(m *manifest.Manifest) { m.Contract = nil }, ""},
		{"v5 microVM: no time ABI to match", func(c *Class) { c.Contracts.Snapshot, c.Contracts.Time = 5, 7 },
			func(m *manifest.Manifest) { *m = *manifest.Sample(manifest.SampleOptions{Version: 5}) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, m := SampleClass(), sampleManifest()
			tt.class(&c)
			tt.m(m)
			_, err := New(&c, m)
			switch {
			case tt.mention == "" && err != nil:
				t.Errorf("New: %v", err)
			case tt.mention != "" && (!errors.Is(err, ErrClassMismatch) || !strings.Contains(err.Error(), tt.mention)):
				t.Errorf("New = %v, want ErrClassMismatch mentioning %q", err, tt.mention)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	badVersion := SampleClass()
	badVersion.KeyEncodingVersion = 2
	empty := SampleClass()
	empty.Bundle.VMM = ""
	tests := []struct {
		name  string
		class *Class
		m     *manifest.Manifest
		want  error
	}{
		{"nil class", nil, sampleManifest(), ErrClassInvalid},
		{"encoding version 2", &badVersion, sampleManifest(), ErrEncodingVersion},
		{"empty bundle.vmm", &empty, sampleManifest(), ErrClassInvalid},
		{"nil manifest", new(SampleClass()), nil, ErrNoManifest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.class, tt.m); !errors.Is(err, tt.want) {
				t.Errorf("New: %v, want %v", err, tt.want)
			}
		})
	}
}

// mutation changes one field of a value, reached from the root by path.
type mutation struct {
	name string
	path []int // struct field or slice element indices; deref follows a pointer
	op   func(v reflect.Value)
}

const deref = -1

func (mu mutation) apply(root reflect.Value) {
	v := root
	for _, i := range mu.path {
		switch {
		case i == deref:
			v = v.Elem()
		case v.Kind() == reflect.Struct:
			v = v.Field(i)
		default:
			v = v.Index(i)
		}
	}
	mu.op(v)
}

// mutations lists one change per leaf of v, plus nil for each pointer and
// dropping the last item of each list; it recurses into the first item.
// Leaves are named by their Go path, e.g. "Contract.Devices[0].IRQ".
func mutations(t *testing.T, v reflect.Value, name string, path []int) []mutation {
	t.Helper()
	at := func(i int) []int { return append(slices.Clone(path), i) }
	one := func(suffix string, op func(reflect.Value)) []mutation {
		return []mutation{{name + suffix, slices.Clone(path), op}}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			t.Fatalf("%s is nil; the walked value must set every optional", name)
		}
		out := one("=nil", func(f reflect.Value) { f.SetZero() })
		return append(out, mutations(t, v.Elem(), name, at(deref))...)
	case reflect.Struct:
		var out []mutation
		for i := range v.NumField() {
			n := v.Type().Field(i).Name
			if name != "" {
				n = name + "." + n
			}
			out = append(out, mutations(t, v.Field(i), n, at(i))...)
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return one("", func(f reflect.Value) { f.SetBytes(append(bytes.Clone(f.Bytes()), 0xff)) })
		}
		if v.Len() == 0 {
			t.Fatalf("%s is empty; the walked value must fill every list", name)
		}
		out := one("=drop-last", func(f reflect.Value) { f.Set(f.Slice(0, f.Len()-1)) })
		return append(out, mutations(t, v.Index(0), name+"[0]", at(0))...)
	case reflect.String:
		return one("", func(f reflect.Value) { f.SetString(f.String() + "x") })
	case reflect.Bool:
		return one("", func(f reflect.Value) { f.SetBool(!f.Bool()) })
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		return one("", func(f reflect.Value) { f.SetUint(f.Uint() + 1) })
	case reflect.Int32, reflect.Int64:
		return one("", func(f reflect.Value) { f.SetInt(f.Int() + 1) })
	}
	t.Fatalf("%s: no mutation for kind %s", name, v.Kind())
	return nil
}
