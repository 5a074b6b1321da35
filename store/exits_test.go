package store

import (
	"encoding/json"
	"testing"
)

// TestLeaseRowState reads the state of marshalled leases of every state,
// also when a string field holds the state key's text.
func TestLeaseRowState(t *testing.T) {
	for _, st := range []LeaseState{Reserved, Bound, Releasing, TeardownFailed, Exited} {
		l := Lease{CloneID: "c1", State: st, CheckError: `check: "state":"bound"`, Process: &ProcessIdentity{PID: 7, BootID: "b"}}
		row, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := leaseRowState(row); !ok || got != st {
			t.Errorf("leaseRowState(%s) = %q, %v; want %q", row, got, ok, st)
		}
	}
	for _, row := range []string{``, `{}`, `{"state":"bound`, `{"clone_id":"c1"}`} {
		if got, ok := leaseRowState([]byte(row)); ok {
			t.Errorf("leaseRowState(%s) = %q, true; want not ok", row, got)
		}
	}
}
