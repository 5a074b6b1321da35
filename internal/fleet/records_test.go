package fleet

import "testing"

// TestQuarantines: only a record in state lifted releases a template; a
// value that does not decode quarantines it (fail closed).
func TestQuarantines(t *testing.T) {
	for _, c := range []struct {
		value string
		want  bool
	}{
		{`{"state":"tombstoned","host":"a"}`, true},
		{`{"state":"lifted","host":"a"}`, false},
		{`{"state":"something new"}`, true},
		{`not json`, true},
		{``, true},
	} {
		if got := quarantines([]byte(c.value)); got != c.want {
			t.Errorf("quarantines(%q) = %v, want %v", c.value, got, c.want)
		}
	}
}

// TestTombstoneKeys: a tombstone key names a fleet ID only if what
// follows the prefix is 64 lowercase hex digits.
func TestTombstoneKeys(t *testing.T) {
	k := keys{DefaultPrefix}
	id := "cf5f7a84a9fda4f35632f2159e9391cadac820f2078973bd951eabfb652c65cb"
	if got, ok := k.fleetIDOf(k.tombstone(id)); !ok || got != id {
		t.Errorf("fleetIDOf(%q) = %q, %v", k.tombstone(id), got, ok)
	}
	for _, key := range []string{
		k.tombstones() + "CF5F7A84A9FDA4F35632F2159E9391CADAC820F2078973BD951EABFB652C65CB",
		k.tombstones() + id[:63],
		k.tombstones() + id + "/x",
		"/other/tombstones/" + id,
		k.catalog(id, "host"),
	} {
		if got, ok := k.fleetIDOf(key); ok {
			t.Errorf("fleetIDOf(%q) = %q, true; want no fleet ID", key, got)
		}
	}
}
