package fleet

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Tombstone states in a TombstoneRecord.
const (
	StateTombstoned = "tombstoned"
	StateLifted     = "lifted"
)

// TombstoneRecord is the value of P/tombstones/<fleet ID>: the fleet's
// quarantine of one template, and who set (or lifted) it.
type TombstoneRecord struct {
	State    string    `json:"state"`              // StateTombstoned or StateLifted
	Host     string    `json:"host"`               // the host ID (store ID) that wrote it
	Hostname string    `json:"hostname,omitempty"` // that host's name, for people
	Reason   string    `json:"reason,omitempty"`
	UID      uint32    `json:"uid"` // the caller's user ID on that host
	At       time.Time `json:"at"`  // when the caller set it there
}

// HostRecord is the value of P/hosts/<host ID>.
type HostRecord struct {
	Hostname string    `json:"hostname"`
	Store    string    `json:"store"` // the store's directory on that host
	Joined   time.Time `json:"joined"`
}

// CatalogEntry is the value of P/catalog/<fleet ID>/<host ID>: one
// generation a host holds.
type CatalogEntry struct {
	Generation string `json:"generation"` // the host's own generation ID, such as g000001
	KeyID      string `json:"key_id"`
	State      string `json:"state"` // published, tombstoned or retiring, on that host
}

// keys names the etcd keys under one prefix.
type keys struct{ prefix string }

func (k keys) host(host string) string         { return k.prefix + "hosts/" + host }
func (k keys) tombstones() string              { return k.prefix + "tombstones/" }
func (k keys) tombstone(fleetID string) string { return k.tombstones() + fleetID }
func (k keys) catalog(fleetID, host string) string {
	return k.prefix + "catalog/" + fleetID + "/" + host
}

// fleetIDOf returns the fleet ID a tombstone key names, and whether it
// is one (64 lowercase hex digits).
func (k keys) fleetIDOf(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, k.tombstones())
	return id, ok && ValidID(id)
}

// ValidID reports whether id is a fleet identity: 64 lowercase hex digits.
func ValidID(id string) bool {
	if len(id) != 64 || strings.ToLower(id) != id {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// quarantines reports whether value, a tombstone key's value, quarantines
// its template: a record in state lifted does not; any other value,
// including one that does not decode, does (fail closed).
func quarantines(value []byte) bool {
	var r TombstoneRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return true
	}
	return r.State != StateLifted
}
