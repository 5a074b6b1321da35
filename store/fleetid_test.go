package store

import "testing"

// TestFleetIDPinned pins the fleet identity of a fixed record: a change to
// the derivation changes every host's identities, which needs a new
// FleetIDVersion. It also holds that the identity ignores what differs
// between hosts (generation ID, times, artifact order) and follows what
// makes the template (key ID, names, digests).
func TestFleetIDPinned(t *testing.T) {
	g := Generation{
		ID:    7,
		KeyID: "705df3f4ad4fb6af8e5b3553d3476c24f58f618f76c60a7ea92f2eaffcda8956",
		Artifacts: []Artifact{
			{Name: "manifest.bin", Size: 100, SHA256: "1111111111111111111111111111111111111111111111111111111111111111"},
			{Name: "state.bin", Size: 200, SHA256: "2222222222222222222222222222222222222222222222222222222222222222"},
			{Name: "memory.bin", Size: 300, SHA256: "3333333333333333333333333333333333333333333333333333333333333333"},
		},
	}
	const want = "cf5f7a84a9fda4f35632f2159e9391cadac820f2078973bd951eabfb652c65cb" // computed independently (Python hashlib) from the framing in FleetID's doc
	if got := g.FleetID(); got != want {
		t.Fatalf("FleetID = %s, want %s", got, want)
	}
	other := g
	other.ID = 99
	other.Artifacts = []Artifact{g.Artifacts[2], g.Artifacts[0], g.Artifacts[1]}
	if got := other.FleetID(); got != want {
		t.Errorf("another generation ID and artifact order: FleetID = %s, want %s", got, want)
	}
	changed := g
	changed.Artifacts = append([]Artifact(nil), g.Artifacts...)
	changed.Artifacts[1].SHA256 = "4444444444444444444444444444444444444444444444444444444444444444"
	if got := changed.FleetID(); got == want {
		t.Error("another state.bin digest: same FleetID")
	}
	rekeyed := g
	rekeyed.KeyID = "805df3f4ad4fb6af8e5b3553d3476c24f58f618f76c60a7ea92f2eaffcda8956"
	if got := rekeyed.FleetID(); got == want {
		t.Error("another key ID: same FleetID")
	}
}
