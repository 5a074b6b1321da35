package store_test

import (
	"strings"
	"testing"

	"templatefs/store"
)

// FuzzValidateCloneID checks that every accepted clone ID is one safe path
// component in the documented set, and that nothing panics. Corpus:
// testdata/fuzz/FuzzValidateCloneID.
func FuzzValidateCloneID(f *testing.F) {
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
// exactly one spelling: the one String renders. Corpus:
// testdata/fuzz/FuzzParseGenerationID.
func FuzzParseGenerationID(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		id, err := store.ParseGenerationID(s)
		if err == nil && (id == 0 || id.String() != s) {
			t.Fatalf("accepted %q as %d, which renders as %q", s, id, id)
		}
	})
}
