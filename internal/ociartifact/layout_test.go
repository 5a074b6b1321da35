package ociartifact

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// sampleConfig is a valid config of the sample capture's key.
func sampleConfig(t testing.TB) Config {
	t.Helper()
	class := templatekey.SampleClass()
	k, err := templatekey.New(&class, manifest.Sample(manifest.SampleOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	cj, err := json.Marshal(class)
	if err != nil {
		t.Fatal(err)
	}
	digest := strings.Repeat("ab", 32)
	return Config{
		FormatVersion: FormatVersion, KeyID: k.ID(), Key: k.Text(), Class: cj,
		Artifacts: []Artifact{{"manifest.bin", 100, digest}, {"state.bin", 4096, digest}, {"memory.bin", 1 << 30, digest}},
	}
}

func marshal(t testing.TB, c Config) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeConfig(t *testing.T) {
	c := sampleConfig(t)
	got, class, err := DecodeConfig(marshal(t, c))
	if err != nil || got.KeyID != c.KeyID || class.Bundle.VMM != templatekey.SampleClass().Bundle.VMM {
		t.Fatalf("DecodeConfig of a valid config: %v, %+v", err, got)
	}
	for name, edit := range map[string]func(c *Config){
		"version":       func(c *Config) { c.FormatVersion = 2 },
		"key id":        func(c *Config) { c.KeyID = strings.Repeat("0", 64) },
		"key text":      func(c *Config) { c.Key += "x=1\n" },
		"class":         func(c *Config) { c.Class = json.RawMessage(`{"key_encoding_version":1}`) },
		"no artifacts":  func(c *Config) { c.Artifacts = nil },
		"order":         func(c *Config) { c.Artifacts[0], c.Artifacts[1] = c.Artifacts[1], c.Artifacts[0] },
		"path":          func(c *Config) { c.Artifacts[2].Name = "../../etc/passwd" },
		"twice":         func(c *Config) { c.Artifacts[2].Name = "state.bin" },
		"negative size": func(c *Config) { c.Artifacts[1].Size = -1 },
		"digest":        func(c *Config) { c.Artifacts[1].SHA256 = "AB" },
	} {
		c := sampleConfig(t)
		edit(&c)
		if _, _, err := DecodeConfig(marshal(t, c)); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: err = %v, want ErrLayout", name, err)
		}
	}
	for name, raw := range map[string]string{
		"not json":      "{",
		"unknown field": strings.Replace(string(marshal(t, c)), `"format_version"`, `"extra":1,"format_version"`, 1),
		"trailing":      string(marshal(t, c)) + "{}",
	} {
		if _, _, err := DecodeConfig([]byte(raw)); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: err = %v, want ErrLayout", name, err)
		}
	}
}

// TestCheckManifest: the layers must be the config's artifacts, in order,
// with the layer media type, matching annotations and a possible size.
func TestCheckManifest(t *testing.T) {
	c := sampleConfig(t)
	layers := func() []ocispec.Descriptor {
		var l []ocispec.Descriptor
		for _, a := range c.Artifacts {
			l = append(l, ocispec.Descriptor{MediaType: LayerMediaType, Size: headerSize, Annotations: map[string]string{
				AnnotationTitle: a.Name, AnnotationSize: strconv.FormatInt(a.Size, 10), AnnotationSHA256: a.SHA256,
			}})
		}
		return l
	}
	if err := checkManifest(ocispec.Manifest{Layers: layers()}, c); err != nil {
		t.Fatalf("checkManifest of matching layers: %v", err)
	}
	for name, edit := range map[string]func(l []ocispec.Descriptor) []ocispec.Descriptor{
		"one missing": func(l []ocispec.Descriptor) []ocispec.Descriptor { return l[:2] },
		"media type": func(l []ocispec.Descriptor) []ocispec.Descriptor {
			l[1].MediaType = "application/octet-stream"
			return l
		},
		"title": func(l []ocispec.Descriptor) []ocispec.Descriptor {
			l[1].Annotations[AnnotationTitle] = "memory.bin"
			return l
		},
		"sha256":    func(l []ocispec.Descriptor) []ocispec.Descriptor { l[2].Annotations[AnnotationSHA256] = "x"; return l },
		"too small": func(l []ocispec.Descriptor) []ocispec.Descriptor { l[0].Size = 3; return l },
		"too large": func(l []ocispec.Descriptor) []ocispec.Descriptor { l[0].Size = 1 << 40; return l },
	} {
		if err := checkManifest(ocispec.Manifest{Layers: edit(layers())}, c); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: err = %v, want ErrLayout", name, err)
		}
	}
}

// FuzzDecodeConfig feeds arbitrary config blobs to DecodeConfig: it must
// accept or refuse with ErrLayout, never panic, and what it accepts must
// keep its promises (manifest.bin first, a key ID matching the key).
func FuzzDecodeConfig(f *testing.F) {
	f.Add(marshal(f, sampleConfig(f)))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format_version":1,"artifacts":[{"name":"manifest.bin","size":1,"sha256":"x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, class, err := DecodeConfig(b)
		if err != nil {
			if !errors.Is(err, ErrLayout) {
				t.Fatalf("error %v is not ErrLayout", err)
			}
			return
		}
		if class == nil || c.Artifacts[0].Name != manifest.ManifestFileName || templatekey.IDOf([]byte(c.Key)) != c.KeyID {
			t.Fatalf("accepted a config that breaks its checks: %+v", c)
		}
	})
}
