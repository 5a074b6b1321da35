package store

import (
	"encoding/hex"
	"fmt"
)

// Four numbering schemes meet in a generation record and must not be
// confused; each has its own Go type, and JSON field names say which one a
// record holds:
//
//   - GenerationID (ids.go): the store generation, this store's
//     publication ID ("id" in a generation record, "store_generation" in a
//     lease);
//   - StorageGeneration: the storage generation of bound sandbox blocks;
//   - CaptureGeneration: the time contract's lineage counter
//     ("capture_generation");
//   - VMGenerationID: the guest-visible VM generation ID.

// StorageGeneration is the 16-byte, caller-authenticated storage
// generation shared by all bound sandbox blocks of a v6 capture: a
// SnapshotMicrovmSandboxBlock identity of kind "generation"
// (openvmm-snapshot-format.md §2.6). It names a state of the block
// storage, not a store generation. Its text form is 32 lowercase hex
// digits.
type StorageGeneration [16]byte

// String returns the 32 lowercase hex digits.
func (g StorageGeneration) String() string { return hex.EncodeToString(g[:]) }

// MarshalText returns the 32 lowercase hex digits.
func (g StorageGeneration) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText parses 32 hex digits; anything else is ErrInvalidID.
func (g *StorageGeneration) UnmarshalText(text []byte) error {
	return parseHex16("storage generation", text, (*[16]byte)(g))
}

// CaptureGeneration is the lineage counter g of the captured process:
// time contract field 11 capture_generation (openvmm-snapshot-format.md
// §3.1). Cold boot is 0; a process restored from a capture runs as
// capture_generation + 1, and OpenVMM refuses 0xFFFFFFFF
// (E_GENERATION_EXHAUSTED). It is capture metadata, unrelated to
// GenerationID.
type CaptureGeneration uint32

// VMGenerationID is the 128-bit VM generation ID the guest sees (the
// virtual machine generation identifier device), which a hypervisor
// changes when a VM is restored or cloned so that the guest reseeds its
// entropy (openvmm-snapshot-format.md §7.2, "generation/entropy" step).
// It is per clone, never a property of a store generation. Its text form
// is 32 lowercase hex digits.
type VMGenerationID [16]byte

// String returns the 32 lowercase hex digits.
func (id VMGenerationID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText returns the 32 lowercase hex digits.
func (id VMGenerationID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses 32 hex digits; anything else is ErrInvalidID.
func (id *VMGenerationID) UnmarshalText(text []byte) error {
	return parseHex16("VM generation ID", text, (*[16]byte)(id))
}

func parseHex16(what string, text []byte, out *[16]byte) error {
	if len(text) != 32 {
		return fmt.Errorf("%s %q: want 32 hex digits: %w", what, text, ErrInvalidID)
	}
	if _, err := hex.Decode(out[:], text); err != nil {
		return fmt.Errorf("%s %q: want 32 hex digits: %w", what, text, ErrInvalidID)
	}
	return nil
}
