package store_test

import (
	"strings"
	"testing"

	"templatefs/store"
)

// FuzzValidateCloneID checks that every accepted clone ID is one safe path
// component in the documented set, and that nothing panics.
func FuzzValidateCloneID(f *testing.F) {
	for _, s := range []string{"clone-1", "a", "A.b_c-9", "", ".", "..", "-x", "a/b", "a\x00b", "é", strings.Repeat("x", store.MaxCloneIDLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if store.ValidateCloneID(s) != nil {
			return
		}
		if len(s) == 0 || len(s) > store.MaxCloneIDLen || s[0] == '.' || s[0] == '-' {
			t.Fatalf("accepted %q: bad length or leading byte", s)
		}
		if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			t.Fatalf("accepted %q: byte outside [A-Za-z0-9._-]", s)
		}
	})
}

// FuzzParseGenerationID checks that every accepted generation ID has
// exactly one spelling: the one String renders.
func FuzzParseGenerationID(f *testing.F) {
	for _, s := range []string{"g000001", "g1", "g0000001", "g18446744073709551615", "g18446744073709551616", "g-00001", "G000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := store.ParseGenerationID(s)
		if err == nil && (id == 0 || id.String() != s) {
			t.Fatalf("accepted %q as %d, which renders as %q", s, id, id)
		}
	})
}
