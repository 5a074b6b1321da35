package templatekey

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
)

// MaxClassSize is the largest class JSON DecodeClass reads, in bytes. A class
// is a few hundred bytes; the cap bounds memory before decoding starts.
const MaxClassSize = 64 << 10

// Class is the capture class: what the adapter knows about a capture that the
// manifest does not record. The adapter supplies it as a JSON object with the
// snake_case names of the json tags; every field is required (strings
// non-empty, numbers non-zero) and unknown fields are refused. All of it is
// part of the template key.
//
// Example:
//
//	{"key_encoding_version":1,
//	 "bundle":{"vmm":"openvmm-1.2.0","kernel":"sha256:…","initramfs":"sha256:…","guest_build":"nanvix-2026.1"},
//	 "contracts":{"boot":1,"snapshot":6,"device_state":1,"time":1,"restore_packet":1,"control":1,"activation":1},
//	 "network_policy":"deny-all",
//	 "isolation":{"hypervisor":"kvm","sandbox":"seccomp-v1","vp_count_limit":8}}
type Class struct {
	// KeyEncodingVersion must equal EncodingVersion.
	KeyEncodingVersion uint32 `json:"key_encoding_version"`
	// Bundle names the binaries the capture was made with.
	Bundle Bundle `json:"bundle"`
	// Contracts holds the versions of the VMM/guest contracts a restore relies on.
	Contracts Contracts `json:"contracts"`
	// NetworkPolicy identifies the network policy clones run under, e.g.
	// "deny-all" or "sha256:<hex>" of the policy document.
	NetworkPolicy string `json:"network_policy"`
	// Isolation holds the host isolation settings of the VMM process.
	Isolation Isolation `json:"isolation"`
}

// Bundle holds the identities of the capture's binaries, opaque strings such
// as a version or "sha256:<hex>" of the file. The manifest's own
// openvmm_version is capture metadata (openvmm-snapshot-format.md §2.4); the
// VMM identity is keyed from here instead.
type Bundle struct {
	VMM        string `json:"vmm"`
	Kernel     string `json:"kernel"`
	Initramfs  string `json:"initramfs"`
	GuestBuild string `json:"guest_build"`
}

// Contracts holds contract versions, each non-zero. Snapshot is the
// snapshot format contract (manifest version 5 or 6, §0); the others are the
// boot, device-state, time (time ABI, §3), restore-packet, control-channel
// and activation contracts between adapter, VMM and guest. New requires
// Snapshot to equal the manifest version and, when the manifest has a time
// contract, Time to equal its time_abi_version.
type Contracts struct {
	Boot          uint32 `json:"boot"`
	Snapshot      uint32 `json:"snapshot"`
	DeviceState   uint32 `json:"device_state"`
	Time          uint32 `json:"time"`
	RestorePacket uint32 `json:"restore_packet"`
	Control       uint32 `json:"control"`
	Activation    uint32 `json:"activation"`
}

// Isolation holds the host isolation settings a clone inherits from its
// capture.
type Isolation struct {
	// Hypervisor is the host backend, "kvm", "mshv" or "whp" (§2.3 field 3).
	// Keyed here as well because a standard-machine manifest has no contract
	// and so no source_hypervisor; when the manifest has one, New requires
	// the two to be equal.
	Hypervisor string `json:"hypervisor"`
	// Sandbox names the process sandbox profile confining the VMM, e.g.
	// "seccomp-v1" or "appcontainer-v1", or "none"; required so that running
	// unconfined is stated, not implied by absence.
	Sandbox string `json:"sandbox"`
	// VPCountLimit is the most virtual processors the adapter lets a clone
	// activate at restore (§7.1 restore-time VP activation).
	VPCountLimit uint32 `json:"vp_count_limit"`
}

// DecodeClass reads one class JSON object from r. It reads at most
// MaxClassSize+1 bytes and returns ErrClassTooLarge beyond MaxClassSize;
// ErrClassInvalid for malformed JSON, unknown fields (at any depth), trailing
// data or a missing field; ErrEncodingVersion for an unsupported
// key_encoding_version; and read errors of r, wrapped.
//
// Field names match case-insensitively, as in encoding/json; a key given
// twice keeps its last value.
func DecodeClass(r io.Reader) (*Class, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxClassSize+1))
	if err != nil {
		return nil, fmt.Errorf("read template class: %w", err)
	}
	if len(data) > MaxClassSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrClassTooLarge, MaxClassSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Class
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClassInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the object at byte %d", ErrClassInvalid, dec.InputOffset())
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks that every field is set and the encoding version is
// supported. It returns ErrEncodingVersion or ErrClassInvalid, wrapped with
// the JSON name of the first failing field.
func (c *Class) Validate() error {
	if c.KeyEncodingVersion != EncodingVersion {
		return fmt.Errorf("%w: key_encoding_version %d, supported %d",
			ErrEncodingVersion, c.KeyEncodingVersion, EncodingVersion)
	}
	strs := []struct {
		name, v string
	}{
		{"bundle.vmm", c.Bundle.VMM},
		{"bundle.kernel", c.Bundle.Kernel},
		{"bundle.initramfs", c.Bundle.Initramfs},
		{"bundle.guest_build", c.Bundle.GuestBuild},
		{"network_policy", c.NetworkPolicy},
		{"isolation.hypervisor", c.Isolation.Hypervisor},
		{"isolation.sandbox", c.Isolation.Sandbox},
	}
	for _, f := range strs {
		if f.v == "" {
			return fmt.Errorf("%w: %s is missing or empty", ErrClassInvalid, f.name)
		}
	}
	nums := []struct {
		name string
		v    uint32
	}{
		{"contracts.boot", c.Contracts.Boot},
		{"contracts.snapshot", c.Contracts.Snapshot},
		{"contracts.device_state", c.Contracts.DeviceState},
		{"contracts.time", c.Contracts.Time},
		{"contracts.restore_packet", c.Contracts.RestorePacket},
		{"contracts.control", c.Contracts.Control},
		{"contracts.activation", c.Contracts.Activation},
		{"isolation.vp_count_limit", c.Isolation.VPCountLimit},
	}
	for _, f := range nums {
		if f.v == 0 {
			return fmt.Errorf("%w: %s is missing or 0", ErrClassInvalid, f.name)
		}
	}
	return nil
}

// SampleClass returns a valid class for a v6 microVM capture on KVM, used by
// `templatefs sample-capture` and tests. Binary identities are SHA-256 of
// fixed labels, so they look real and never change.
func SampleClass() Class {
	digest := func(label string) string {
		return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("templatefs sample "+label)))
	}
	return Class{
		KeyEncodingVersion: EncodingVersion,
		Bundle: Bundle{
			VMM:        "openvmm-sample-1.0",
			Kernel:     digest("kernel"),
			Initramfs:  digest("initramfs"),
			GuestBuild: "nanvix-sample-1.0",
		},
		Contracts: Contracts{
			Boot: 1, Snapshot: 6, DeviceState: 1, Time: 1,
			RestorePacket: 1, Control: 1, Activation: 1,
		},
		NetworkPolicy: "deny-all",
		Isolation: Isolation{
			Hypervisor:   "kvm",
			Sandbox:      "seccomp-v1",
			VPCountLimit: 8,
		},
	}
}
