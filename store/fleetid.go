package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
)

// FleetIDVersion is the version of the fleet identity's framing; a change
// to what is hashed, or how, needs a new version.
const FleetIDVersion = 1

// FleetIDDomainTag prefixes the hashed input of every fleet identity,
// keeping it apart from key IDs (templatekey.DomainTag) and other SHA-256
// uses.
const FleetIDDomainTag = "templatefs/fleet-identity"

// FleetID returns g's fleet identity: the name under which every host of
// a fleet knows the same template (docs/fleet.md). It depends only on the
// key ID and the artifacts' names and SHA-256 digests, so two stores
// that hold the same capture bytes under the same key compute the same
// identity, whatever their generation IDs, publication times or store IDs.
//
// FleetID = lowercase hex of SHA-256(FleetIDDomainTag || 0x00 || uint32
// big-endian FleetIDVersion || key ID text || for each artifact in name
// order: 0x00 || name || 0x00 || lowercase hex SHA-256). Names and digests
// contain no NUL, so the framing is unambiguous.
func (g *Generation) FleetID() string {
	arts := slices.Clone(g.Artifacts)
	slices.SortFunc(arts, func(a, b Artifact) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	h.Write([]byte(FleetIDDomainTag))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint32(nil, FleetIDVersion))
	h.Write([]byte(g.KeyID))
	for _, a := range arts {
		h.Write([]byte{0})
		h.Write([]byte(a.Name))
		h.Write([]byte{0})
		h.Write([]byte(a.SHA256))
	}
	return hex.EncodeToString(h.Sum(nil))
}
