package store

import (
	"fmt"
	"strconv"
)

// GenerationID is a store generation: the publication ID of one generation,
// unique per store and never reused (it comes from a bbolt bucket sequence
// committed before the payload is written). It is not OpenVMM's
// capture_generation lineage counter. Zero is never a valid ID.
type GenerationID uint64

// String renders the ID as its directory name: "g" and at least six
// decimal digits, for example "g000042".
func (id GenerationID) String() string { return fmt.Sprintf("g%06d", uint64(id)) }

// ParseGenerationID parses the form String produces. Any other spelling
// (missing "g", too few digits, leading zeros beyond the padding, zero)
// returns ErrInvalidID, so each generation has exactly one name.
func ParseGenerationID(s string) (GenerationID, error) {
	if len(s) < 7 || s[0] != 'g' {
		return 0, fmt.Errorf("generation ID %q: want g and six or more digits: %w", s, ErrInvalidID)
	}
	n, err := strconv.ParseUint(s[1:], 10, 64)
	if err != nil || n == 0 || GenerationID(n).String() != s {
		return 0, fmt.Errorf("generation ID %q: want g and six or more digits: %w", s, ErrInvalidID)
	}
	return GenerationID(n), nil
}

// MaxCloneIDLen is the longest clone ID accepted, in bytes.
const MaxCloneIDLen = 128

// ValidateCloneID checks that s is a clone ID: 1 to MaxCloneIDLen bytes of
// ASCII letters, digits, '.', '_' and '-', not starting with '.' or '-'.
// The set is filename-safe on Linux and Windows, so a clone ID is always
// one path component. It returns ErrInvalidID naming the first bad byte.
func ValidateCloneID(s string) error {
	if len(s) == 0 || len(s) > MaxCloneIDLen {
		return fmt.Errorf("clone ID of %d bytes: want 1 to %d: %w", len(s), MaxCloneIDLen, ErrInvalidID)
	}
	if s[0] == '.' || s[0] == '-' {
		return fmt.Errorf("clone ID %q: must not start with %q: %w", s, s[0], ErrInvalidID)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("clone ID %q: byte %d (%q) is outside [A-Za-z0-9._-]: %w", s, i, c, ErrInvalidID)
		}
	}
	return nil
}

// ValidateKeyID checks that s is a key ID: 64 lowercase hex digits (a
// SHA-256, see package templatekey). It returns ErrInvalidID otherwise.
func ValidateKeyID(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("key ID %q: want 64 lowercase hex digits: %w", s, ErrInvalidID)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("key ID %q: want 64 lowercase hex digits: %w", s, ErrInvalidID)
		}
	}
	return nil
}

// MarshalText renders the ID as String does, so JSON records and lease
// files show "g000042", the name seen in the mount.
func (id GenerationID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the form MarshalText writes (see ParseGenerationID).
func (id *GenerationID) UnmarshalText(b []byte) error {
	v, err := ParseGenerationID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}
