package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The fleet's state in the index (docs/fleet.md), one top-level bucket
// that only a store in a fleet has (it is made by its first write; an
// index without it opens unchanged, at the same SchemaVersion):
//
//	fleet/
//	  revision   <uint64 BE>   the etcd revision the view reflects (0: never synchronised)
//	  view/
//	    <fleet ID>  <etcd value>  the fleet's tombstones as of revision
//	  queue/
//	    <fleet ID>  <JSON FleetQueued>  this host's tombstones and lifts etcd has not acknowledged
var (
	bucketFleet      = []byte("fleet")
	bucketFleetView  = []byte("view")
	bucketFleetQueue = []byte("queue")
	keyFleetRevision = []byte("revision")
)

// FleetQueued is a tombstone or lift set on this host that is to be
// written to the fleet (etcd). It is committed to the index before the
// caller is told the change succeeded, and stays until the fleet has it
// (FleetDequeue). A later change of the same template replaces it.
type FleetQueued struct {
	FleetID   string    `json:"fleet_id"`
	Tombstone bool      `json:"tombstone"` // false: lift
	Reason    string    `json:"reason,omitempty"`
	UID       uint32    `json:"uid"` // the caller's user ID
	At        time.Time `json:"at"`
}

// FleetHeld is one generation the store holds, by fleet identity.
type FleetHeld struct {
	FleetID    string
	Generation GenerationID
	KeyID      string
	State      GenerationState
}

// FleetHeld lists every generation of the store with its fleet identity
// (Generation.FleetID), oldest first.
func (s *Store) FleetHeld() ([]FleetHeld, error) {
	gens, err := s.Generations()
	if err != nil {
		return nil, err
	}
	held := make([]FleetHeld, len(gens))
	for i, g := range gens {
		held[i] = FleetHeld{FleetID: g.FleetID(), Generation: g.ID, KeyID: g.KeyID, State: g.State}
	}
	return held, nil
}

// FleetState is the fleet's state as the index records it.
type FleetState struct {
	Revision int64             // the etcd revision View reflects; 0 before the first synchronisation
	View     map[string][]byte // fleet ID -> etcd value of each fleet tombstone
	Queue    []FleetQueued     // this host's changes not yet in etcd, in fleet ID order
}

// FleetState reads the fleet view, its revision and the queue.
func (s *Store) FleetState() (FleetState, error) {
	st := FleetState{View: map[string][]byte{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		fb := tx.Bucket(bucketFleet)
		if fb == nil {
			return nil
		}
		if v := fb.Get(keyFleetRevision); len(v) == 8 {
			st.Revision = int64(binary.BigEndian.Uint64(v))
		}
		if vb := fb.Bucket(bucketFleetView); vb != nil {
			vb.ForEach(func(k, v []byte) error {
				st.View[string(k)] = bytes.Clone(v)
				return nil
			})
		}
		if qb := fb.Bucket(bucketFleetQueue); qb != nil {
			return qb.ForEach(func(k, v []byte) error {
				var q FleetQueued
				if err := json.Unmarshal(v, &q); err != nil {
					return fmt.Errorf("decode index record fleet/queue/%s: %w", k, err)
				}
				st.Queue = append(st.Queue, q)
				return nil
			})
		}
		return nil
	})
	return st, err
}

// putQueued writes q into fleet/queue in tx, replacing an earlier change
// of the same template.
func putQueued(tx *bolt.Tx, q FleetQueued) error {
	fb, err := tx.CreateBucketIfNotExists(bucketFleet)
	if err != nil {
		return err
	}
	qb, err := fb.CreateBucketIfNotExists(bucketFleetQueue)
	if err != nil {
		return err
	}
	return putJSON(qb, []byte(q.FleetID), q)
}

// queueFor returns the queue write of a local tombstone (or lift) by uid
// when the store queues its changes for the fleet (Options.Fleet), else
// nil.
func (s *Store) queueFor(tombstone bool, uid uint32) func(*bolt.Tx, *Generation) error {
	if !s.fleet {
		return nil
	}
	return func(tx *bolt.Tx, g *Generation) error {
		return putQueued(tx, FleetQueued{FleetID: g.FleetID(), Tombstone: tombstone, UID: uid, At: s.now().UTC()})
	}
}

// QueueFleet records q durably in the queue (one transaction), then
// applies it to every generation of the store with that fleet identity
// through Tombstone or Lift's own transaction (without queueing again),
// and returns those generations. A fleet identity the store does not hold
// is queued all the same: the fleet quarantines it on the hosts that do.
// Errors: the commit's; a generation that cannot be lifted (ErrRetiring)
// is skipped, as retirement is this host's decision.
func (s *Store) QueueFleet(q FleetQueued) ([]GenerationID, error) {
	if err := ValidateKeyID(q.FleetID); err != nil {
		return nil, fmt.Errorf("fleet ID %q: %w", q.FleetID, err)
	}
	if q.At.IsZero() {
		q.At = s.now().UTC()
	}
	if err := s.update(faultFleetQueueCommit, func(tx *bolt.Tx) error { return putQueued(tx, q) }); err != nil {
		return nil, err
	}
	s.log.Info("fleet change queued", "fleet_id", q.FleetID, "tombstone", q.Tombstone, "reason", q.Reason, "uid", q.UID)
	return s.applyFleet(q.FleetID, q.Tombstone, q.UID, nil)
}

// FleetDequeue removes q from the queue once etcd has it, unless a later
// change of the same template replaced it meanwhile.
func (s *Store) FleetDequeue(q FleetQueued) error {
	err := s.update(faultFleetQueueCommit, func(tx *bolt.Tx) error {
		qb := fleetBucket(tx, bucketFleetQueue)
		if qb == nil {
			return errUnchanged
		}
		var now FleetQueued
		if found, err := getJSON(qb, []byte(q.FleetID), &now); err != nil || !found || now.Tombstone != q.Tombstone || !now.At.Equal(q.At) {
			return errors.Join(err, errUnchanged)
		}
		return qb.Delete([]byte(q.FleetID))
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// quarantineByFleet makes g, a generation being published in tx,
// tombstoned if the fleet view holds a tombstone of its template: a host
// that publishes (or pulls) a template the fleet has quarantined never
// grants a lease on it.
func quarantineByFleet(tx *bolt.Tx, g *Generation) {
	if vb := fleetBucket(tx, bucketFleetView); vb != nil && vb.Get([]byte(g.FleetID())) != nil {
		g.State = Tombstoned
		g.Tombstone = &Tombstone{At: g.PublishedAt}
	}
}

// unlessQueued, run in a tombstone or lift transaction, keeps the
// record unchanged (errUnchanged) while the queue holds a change of its
// template: checked in the transaction, so a local change committed just
// before is never undone by an older fleet event.
func unlessQueued(tx *bolt.Tx, g *Generation) error {
	if qb := fleetBucket(tx, bucketFleetQueue); qb != nil && qb.Get([]byte(g.FleetID())) != nil {
		return errUnchanged
	}
	return nil
}

func fleetBucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	if fb := tx.Bucket(bucketFleet); fb != nil {
		return fb.Bucket(name)
	}
	return nil
}

// ApplyFleet records the fleet's tombstone of fleetID as etcd has it at
// revision rev: value is the etcd value, nil when the tombstone was
// lifted (deleted). It first tombstones (or lifts) every generation of
// the store with that fleet identity, each in Tombstone's (or Lift's)
// own transaction, then commits the view entry and the revision. A crash
// between the two leaves the older revision, from which the fleet replays
// the change again; both steps are idempotent. The change is not queued:
// it came from the fleet. A retiring generation is left as it is. While
// this host has a change of the same template queued, its generations
// are left as they are too: the queued change is newer than anything
// etcd has (it is written after every event the member has applied) and
// will come back through the watch. With own (the change is this host's
// own, echoed back) only the view and revision are committed: the store
// applied the change before it queued it, and its generations may show a
// later local change since.
func (s *Store) ApplyFleet(fleetID string, value []byte, rev int64, own bool) error {
	if !own {
		if _, err := s.applyFleet(fleetID, value != nil, 0, unlessQueued); err != nil {
			return err
		}
	}
	return s.update(faultFleetViewCommit, func(tx *bolt.Tx) error {
		vb, err := fleetViewBucket(tx)
		if err != nil {
			return err
		}
		if value == nil {
			err = vb.Delete([]byte(fleetID))
		} else {
			err = vb.Put([]byte(fleetID), value)
		}
		if err != nil {
			return err
		}
		return putFleetRevision(tx, rev)
	})
}

// ResyncFleet replaces the view with the fleet's whole tombstone set as
// etcd has it at revision rev (after the watch lost its place, such as
// to a compaction): every template in tombstones and not in the view is
// tombstoned, every template in the view and no longer in tombstones is
// lifted, each as ApplyFleet does, then the view and revision are
// committed in one transaction. Tombstones this store set alone and never
// sent to the fleet are not in the view, so a resync never lifts them.
func (s *Store) ResyncFleet(rev int64, tombstones map[string][]byte) error {
	st, err := s.FleetState()
	if err != nil {
		return err
	}
	for id := range tombstones {
		if _, ok := st.View[id]; !ok {
			if _, err := s.applyFleet(id, true, 0, unlessQueued); err != nil {
				return err
			}
		}
	}
	for id := range st.View {
		if _, ok := tombstones[id]; !ok {
			if _, err := s.applyFleet(id, false, 0, unlessQueued); err != nil {
				return err
			}
		}
	}
	return s.update(faultFleetViewCommit, func(tx *bolt.Tx) error {
		fb, err := tx.CreateBucketIfNotExists(bucketFleet)
		if err != nil {
			return err
		}
		if fb.Bucket(bucketFleetView) != nil {
			if err := fb.DeleteBucket(bucketFleetView); err != nil {
				return err
			}
		}
		vb, err := fb.CreateBucket(bucketFleetView)
		if err != nil {
			return err
		}
		for id, v := range tombstones {
			if err := vb.Put([]byte(id), v); err != nil {
				return err
			}
		}
		return putFleetRevision(tx, rev)
	})
}

func fleetViewBucket(tx *bolt.Tx) (*bolt.Bucket, error) {
	fb, err := tx.CreateBucketIfNotExists(bucketFleet)
	if err != nil {
		return nil, err
	}
	return fb.CreateBucketIfNotExists(bucketFleetView)
}

// putFleetRevision records rev unless the index already has a later one.
func putFleetRevision(tx *bolt.Tx, rev int64) error {
	fb := tx.Bucket(bucketFleet)
	if v := fb.Get(keyFleetRevision); len(v) == 8 && int64(binary.BigEndian.Uint64(v)) >= rev {
		return nil
	}
	return fb.Put(keyFleetRevision, binary.BigEndian.AppendUint64(nil, uint64(rev)))
}

// applyFleet tombstones (or lifts) every generation with fleet identity
// fleetID through Tombstone's (Lift's) own transaction, queueing nothing
// (guard, if not nil, runs in that transaction and may keep the record
// unchanged), and returns them. Lifting a retiring generation is skipped.
func (s *Store) applyFleet(fleetID string, tombstone bool, uid uint32, guard func(*bolt.Tx, *Generation) error) ([]GenerationID, error) {
	held, err := s.FleetHeld()
	if err != nil {
		return nil, err
	}
	var gens []GenerationID
	for _, h := range held {
		if h.FleetID != fleetID {
			continue
		}
		if tombstone {
			_, err = s.tombstone(h.Generation, uid, guard)
		} else if h.State != Retiring {
			_, err = s.lift(h.Generation, guard)
		}
		if err != nil && !errors.Is(err, ErrNotFound) { // retired meanwhile
			return gens, err
		}
		gens = append(gens, h.Generation)
	}
	return gens, nil
}
