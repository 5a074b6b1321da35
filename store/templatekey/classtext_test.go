package templatekey

import (
	"errors"
	"strings"
	"testing"
)

// TestClassFromTextRoundTrip: the class recovered from a key's text makes
// the same key with the same manifest.
func TestClassFromTextRoundTrip(t *testing.T) {
	c := SampleClass()
	c.Bundle.VMM = "openvmm \"quoted\"\n1.0" // escapes survive
	m := fullManifest()
	c.Contracts.Snapshot = m.Version
	k := mustKey(t, c, m)
	got, err := ClassFromText(k.Text())
	if err != nil {
		t.Fatal(err)
	}
	if *got != c {
		t.Fatalf("ClassFromText = %+v, want %+v", *got, c)
	}
	k2, err := New(got, m)
	if err != nil || k2.ID() != k.ID() {
		t.Fatalf("key of the recovered class = %v, %v; want %s", k2.ID(), err, k.ID())
	}
}

func TestClassFromTextRefuses(t *testing.T) {
	text := mustKey(t, SampleClass(), sampleManifest()).Text()
	for name, bad := range map[string]string{
		"empty":         "",
		"short":         strings.Join(strings.Split(text, "\n")[:5], "\n"),
		"renamed":       strings.Replace(text, "class.bundle.vmm=", "class.bundle.vmx=", 1),
		"unquoted":      strings.Replace(text, `class.network_policy="deny-all"`, "class.network_policy=deny-all", 1),
		"not a number":  strings.Replace(text, "class.contracts.boot=1", "class.contracts.boot=x", 1),
		"too large":     strings.Replace(text, "class.contracts.boot=1", "class.contracts.boot=4294967296", 1),
		"zero contract": strings.Replace(text, "class.contracts.boot=1", "class.contracts.boot=0", 1),
	} {
		if _, err := ClassFromText(bad); !errors.Is(err, ErrClassInvalid) {
			t.Errorf("%s: err = %v, want ErrClassInvalid", name, err)
		}
	}
}
