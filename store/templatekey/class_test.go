package templatekey

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// sampleJSON returns SampleClass as JSON after edit changes its generic form.
func sampleJSON(t testing.TB, edit func(m map[string]any)) string {
	t.Helper()
	b, err := json.Marshal(SampleClass())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// object returns the nested JSON object of m named by key.
func object(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

func TestDecodeClassRoundTrip(t *testing.T) {
	want := SampleClass()
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeClass(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("DecodeClass(%s): %v", b, err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("round trip = %+v, want %+v", *got, want)
	}
}

func TestDecodeClassAccepts(t *testing.T) {
	valid := sampleJSON(t, func(map[string]any) {})
	tests := []struct{ name, in string }{
		{"compact", valid},
		{"trailing whitespace", valid + " \n\t"},
		{"exactly MaxClassSize", valid + strings.Repeat(" ", MaxClassSize-len(valid))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeClass(strings.NewReader(tt.in)); err != nil {
				t.Errorf("DecodeClass: %v", err)
			}
		})
	}
}

func TestDecodeClassRefuses(t *testing.T) {
	valid := sampleJSON(t, func(map[string]any) {})
	type row struct {
		name string
		in   string
		want error
		text string // a substring the error must contain
	}
	tests := []row{
		{"unknown top-level field", sampleJSON(t, func(m map[string]any) { m["tier"] = "x" }), ErrClassInvalid, `"tier"`},
		{"unknown bundle field", sampleJSON(t, func(m map[string]any) { object(m, "bundle")["firmware"] = "x" }), ErrClassInvalid, `"firmware"`},
		{"unknown contracts field", sampleJSON(t, func(m map[string]any) { object(m, "contracts")["gpu"] = 1 }), ErrClassInvalid, `"gpu"`},
		{"unknown isolation field", sampleJSON(t, func(m map[string]any) { object(m, "isolation")["seccomp"] = true }), ErrClassInvalid, `"seccomp"`},
		{"encoding version 2", sampleJSON(t, func(m map[string]any) { m["key_encoding_version"] = 2 }), ErrEncodingVersion, "key_encoding_version 2, supported 1"},
		{"encoding version missing", sampleJSON(t, func(m map[string]any) { delete(m, "key_encoding_version") }), ErrEncodingVersion, "key_encoding_version 0, supported 1"},
		{"empty bundle.kernel", sampleJSON(t, func(m map[string]any) { object(m, "bundle")["kernel"] = "" }), ErrClassInvalid, "bundle.kernel"},
		{"contracts.boot as string", sampleJSON(t, func(m map[string]any) { object(m, "contracts")["boot"] = "1" }), ErrClassInvalid, "contracts.boot"},
		{"negative contracts.time", sampleJSON(t, func(m map[string]any) { object(m, "contracts")["time"] = -1 }), ErrClassInvalid, "contracts.time"},
		{"contracts.control above uint32", sampleJSON(t, func(m map[string]any) { object(m, "contracts")["control"] = 1 << 32 }), ErrClassInvalid, "contracts.control"},
		{"bundle not an object", sampleJSON(t, func(m map[string]any) { m["bundle"] = "openvmm" }), ErrClassInvalid, "bundle"},
		{"second object", valid + "{}", ErrClassInvalid, "trailing data"},
		{"trailing garbage", valid + "x", ErrClassInvalid, "trailing data"},
		{"truncated", valid[:len(valid)-1], ErrClassInvalid, "unexpected EOF"},
		{"empty input", "", ErrClassInvalid, "EOF"},
		{"array", "[]", ErrClassInvalid, "array"},
		{"null", "null", ErrEncodingVersion, "key_encoding_version 0"},
		{"oversize", valid + strings.Repeat(" ", MaxClassSize+1-len(valid)), ErrClassTooLarge, "65536"},
	}
	// Every required field, removed in turn.
	for _, f := range []string{"bundle.vmm", "bundle.kernel", "bundle.initramfs", "bundle.guest_build",
		"contracts.boot", "contracts.snapshot", "contracts.device_state", "contracts.time",
		"contracts.restore_packet", "contracts.control", "contracts.activation", "network_policy",
		"isolation.hypervisor", "isolation.sandbox", "isolation.vp_count_limit"} {
		in := sampleJSON(t, func(m map[string]any) {
			if parent, key, ok := strings.Cut(f, "."); ok {
				delete(object(m, parent), key)
			} else {
				delete(m, f)
			}
		})
		tests = append(tests, row{"missing " + f, in, ErrClassInvalid, f + " is missing"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeClass(strings.NewReader(tt.in))
			if !errors.Is(err, tt.want) || c != nil {
				t.Fatalf("DecodeClass = %v, %v; want nil, %v", c, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not mention %q", err, tt.text)
			}
		})
	}
}

func TestDecodeClassReadError(t *testing.T) {
	cause := errors.New("disk gone")
	if _, err := DecodeClass(iotest.ErrReader(cause)); !errors.Is(err, cause) {
		t.Errorf("DecodeClass = %v, want it to wrap %v", err, cause)
	}
}

// FuzzDecodeClass checks that DecodeClass never panics and that whatever it
// accepts is valid, round-trips, and yields a key with a manifest that
// agrees with it (checkMatch), and a key or ErrClassMismatch with the
// sample manifest.
func FuzzDecodeClass(f *testing.F) {
	f.Add([]byte(sampleJSON(f, func(map[string]any) {})))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeClass(bytes.NewReader(data))
		if err != nil {
			if c != nil {
				t.Fatalf("DecodeClass returned a class with error %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted class fails Validate: %v", err)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeClass(bytes.NewReader(b))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-decoding %s = %+v, %v; want %+v", b, again, err, c)
		}
		if _, err := New(c, sampleManifest()); err != nil && !errors.Is(err, ErrClassMismatch) {
			t.Fatalf("New on accepted class: %v", err)
		}
		m := sampleManifest()
		m.Version, m.Contract.SourceHypervisor, m.Contract.Time.TimeABIVersion = c.Contracts.Snapshot, c.Isolation.Hypervisor, c.Contracts.Time
		if _, err := New(c, m); err != nil {
			t.Fatalf("New on accepted class and a manifest that agrees: %v", err)
		}
	})
}
