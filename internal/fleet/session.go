package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"templatefs/internal/hostclock"
)

// session is one connection's life: it takes an etcd lease for the host,
// writes the host record, the queue and the catalog, then resumes the
// watch of tombstones from the store's revision (or resynchronises from a
// full read if etcd compacted that revision away) and reports connected
// once the watch has caught up. It returns why it ended: the context, a
// failed request, a failed probe, the lease lost, the watch ended.
func (m *Member) session(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lease, err := m.startLease(ctx, cancel)
	if err != nil {
		return err
	}
	if err := m.drain(ctx); err != nil {
		return err
	}
	published := map[string]string{} // catalog key -> value this session wrote
	if err := m.publishCatalog(ctx, lease, published); err != nil {
		return err
	}
	w, err := m.startWatch(ctx)
	if err != nil {
		return err
	}
	if w.caughtUp() {
		m.setConnected(true, nil)
	}
	probe := time.NewTicker(m.cfg.Probe)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return errors.New("etcd lease of this host lost")
		case <-m.kick:
			if err := m.drain(ctx); err != nil {
				return err
			}
			if err := m.publishCatalog(ctx, lease, published); err != nil {
				return err
			}
		case <-probe.C:
			octx, ocancel := opCtx(ctx)
			_, err := m.cli.Get(octx, m.keys.host(m.cfg.HostID), clientv3.WithKeysOnly())
			ocancel()
			if err != nil {
				return fmt.Errorf("etcd does not answer: %w", err)
			}
		case wr, ok := <-w.ch:
			if !ok {
				return errors.New("watch of tombstones ended")
			}
			if compacted(wr) { // etcd sends it after the watch's creation
				m.log.Warn("fleet: etcd compacted the revision this store had; resynchronising", "revision", w.applied, "compacted_to", wr.CompactRevision)
				if w, err = m.resync(ctx); err != nil {
					return err
				}
				if w.caughtUp() {
					m.setConnected(true, nil)
				}
				continue
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("watch of tombstones: %w", err)
			}
			for _, ev := range wr.Events {
				if err := m.applyEvent(ev); err != nil {
					return err
				}
				w.applied = ev.Kv.ModRevision
			}
			if w.caughtUp() {
				m.setConnected(true, nil)
			}
		}
	}
}

// startLease grants the host's etcd lease, writes the host record under
// it and keeps it alive; losing it cancels the session (cancel).
func (m *Member) startLease(ctx context.Context, cancel context.CancelFunc) (clientv3.LeaseID, error) {
	octx, ocancel := opCtx(ctx)
	defer ocancel()
	g, err := m.cli.Grant(octx, hostTTL)
	if err != nil {
		return 0, fmt.Errorf("grant the host's etcd lease: %w", err)
	}
	rec, _ := json.Marshal(HostRecord{Hostname: m.cfg.Hostname, Store: m.cfg.StoreDir, Joined: hostclock.Now().UTC()})
	if _, err := m.cli.Put(octx, m.keys.host(m.cfg.HostID), string(rec), clientv3.WithLease(g.ID)); err != nil {
		return 0, fmt.Errorf("write the host record: %w", err)
	}
	ka, err := m.cli.KeepAlive(ctx, g.ID)
	if err != nil {
		return 0, fmt.Errorf("keep the host's etcd lease alive: %w", err)
	}
	m.mu.Lock()
	m.lease = g.ID
	m.mu.Unlock()
	go func() {
		for range ka {
		}
		cancel() // the lease expired or the session ended
	}()
	return g.ID, nil
}

// drain writes every queued change to etcd, then removes it from the
// store's queue. A lift is written as a record in state lifted.
func (m *Member) drain(ctx context.Context) error {
	saved, err := m.st.Saved()
	if err != nil {
		return fmt.Errorf("read the fleet queue: %w", err)
	}
	for _, q := range saved.Queued {
		rec := TombstoneRecord{State: StateLifted, Host: m.cfg.HostID, Hostname: m.cfg.Hostname, Reason: q.Reason, UID: q.UID, At: q.At.UTC()}
		if q.Tombstone {
			rec.State = StateTombstoned
		}
		val, _ := json.Marshal(rec)
		octx, ocancel := opCtx(ctx)
		_, err := m.cli.Put(octx, m.keys.tombstone(q.FleetID), string(val))
		ocancel()
		if err != nil {
			return fmt.Errorf("write fleet %s of %s: %w", rec.State, q.FleetID, err)
		}
		if err := m.st.Dequeue(q); err != nil {
			return fmt.Errorf("dequeue fleet %s of %s: %w", rec.State, q.FleetID, err)
		}
		m.log.Info("fleet: "+rec.State+" written to etcd", "fleet_id", q.FleetID, "reason", q.Reason, "uid", q.UID)
	}
	return nil
}

// publishCatalog writes the catalog entries of the generations the store
// holds under lease and deletes those of generations it no longer holds;
// published is what this session wrote before, updated in place.
func (m *Member) publishCatalog(ctx context.Context, lease clientv3.LeaseID, published map[string]string) error {
	held, err := m.st.Held()
	if err != nil {
		return fmt.Errorf("list the generations held: %w", err)
	}
	want := map[string]string{}
	for _, h := range held {
		val, _ := json.Marshal(CatalogEntry{Generation: h.Generation, KeyID: h.KeyID, State: h.State})
		want[m.keys.catalog(h.FleetID, m.cfg.HostID)] = string(val)
	}
	for k, v := range want {
		if published[k] == v {
			continue
		}
		octx, ocancel := opCtx(ctx)
		_, err := m.cli.Put(octx, k, v, clientv3.WithLease(lease))
		ocancel()
		if err != nil {
			return fmt.Errorf("write catalog entry %s: %w", k, err)
		}
		published[k] = v
	}
	for k := range published {
		if _, ok := want[k]; ok {
			continue
		}
		octx, ocancel := opCtx(ctx)
		_, err := m.cli.Delete(octx, k)
		ocancel()
		if err != nil {
			return fmt.Errorf("delete catalog entry %s: %w", k, err)
		}
		delete(published, k)
	}
	return nil
}

// watch is the tombstone watch of a session and how far it has to go
// before it has caught up with etcd.
type watch struct {
	ch      clientv3.WatchChan
	target  int64 // the last tombstone change etcd had when the watch began
	applied int64 // the revision of the last event applied
}

func (w *watch) caughtUp() bool { return w.applied >= w.target }

// startWatch resumes the watch of tombstones after the store's revision.
// If etcd has compacted that revision (rpctypes.ErrCompacted), or the
// store has none yet, it resynchronises instead (resync). etcd may also
// refuse a resumed watch for compaction after its creation; the session
// then resynchronises.
func (m *Member) startWatch(ctx context.Context) (*watch, error) {
	saved, err := m.st.Saved()
	if err != nil {
		return nil, fmt.Errorf("read the fleet revision: %w", err)
	}
	prefix := m.keys.tombstones()
	if rev := saved.Revision; rev > 0 {
		ch := m.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
		first, err := firstResponse(ctx, ch)
		switch {
		case err != nil:
			return nil, err
		case compacted(first):
			m.log.Warn("fleet: etcd compacted the revision this store had; resynchronising", "revision", rev, "compacted_to", first.CompactRevision)
		case first.Err() != nil:
			return nil, fmt.Errorf("watch of tombstones: %w", first.Err())
		default:
			// Every change since rev is a put (a lift too), so the newest
			// one is what the watch must reach.
			octx, ocancel := opCtx(ctx)
			resp, err := m.cli.Get(octx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMinModRev(rev+1))
			ocancel()
			if err != nil {
				return nil, fmt.Errorf("read tombstone changes since revision %d: %w", rev, err)
			}
			w := &watch{ch: ch, applied: rev}
			for _, kv := range resp.Kvs {
				w.target = max(w.target, kv.ModRevision)
			}
			m.log.Info("fleet: watch resumed", "revision", rev, "changes_to_replay", len(resp.Kvs))
			return w, nil
		}
	}
	return m.resync(ctx)
}

// compacted reports whether wr refuses a watch because etcd compacted
// the revision it starts from.
func compacted(wr clientv3.WatchResponse) bool {
	return wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted)
}

// resync reads every tombstone, applies the whole set to the store
// (Store.Resync) and watches from the revision read.
func (m *Member) resync(ctx context.Context) (*watch, error) {
	prefix := m.keys.tombstones()
	octx, ocancel := opCtx(ctx)
	resp, err := m.cli.Get(octx, prefix, clientv3.WithPrefix())
	ocancel()
	if err != nil {
		return nil, fmt.Errorf("read the fleet's tombstones: %w", err)
	}
	rev := resp.Header.Revision
	tombstones := map[string][]byte{}
	for _, kv := range resp.Kvs {
		if id, ok := m.keys.fleetIDOf(string(kv.Key)); ok && quarantines(kv.Value) {
			tombstones[id] = kv.Value
		}
	}
	if err := m.st.Resync(rev, tombstones); err != nil {
		return nil, fmt.Errorf("resynchronise the store at revision %d: %w", rev, err)
	}
	m.log.Info("fleet: resynchronised", "revision", rev, "tombstones", len(tombstones))
	ch := m.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
	if first, err := firstResponse(ctx, ch); err != nil || first.Err() != nil {
		return nil, fmt.Errorf("watch of tombstones from revision %d: %w", rev+1, errors.Join(err, first.Err()))
	}
	return &watch{ch: ch, applied: rev, target: rev}, nil
}

// firstResponse waits (at most opTimeout) for a new watch's first
// response: its creation (clientv3.WithCreatedNotify) or its refusal.
func firstResponse(ctx context.Context, ch clientv3.WatchChan) (clientv3.WatchResponse, error) {
	t := time.NewTimer(opTimeout)
	defer t.Stop()
	select {
	case wr, ok := <-ch:
		if !ok {
			return wr, errors.New("watch of tombstones ended")
		}
		return wr, nil
	case <-t.C:
		return clientv3.WatchResponse{}, errors.New("watch of tombstones: etcd did not answer")
	case <-ctx.Done():
		return clientv3.WatchResponse{}, ctx.Err()
	}
}

// applyEvent applies one tombstone change to the store. A key that does
// not name a fleet ID is logged and skipped.
func (m *Member) applyEvent(ev *clientv3.Event) error {
	key := string(ev.Kv.Key)
	id, ok := m.keys.fleetIDOf(key)
	if !ok {
		m.log.Warn("fleet: skipping a tombstone key that names no fleet ID", "key", key)
		return nil
	}
	var value []byte
	if ev.Type == mvccpb.PUT && quarantines(ev.Kv.Value) {
		value = ev.Kv.Value
	}
	var rec TombstoneRecord
	json.Unmarshal(ev.Kv.Value, &rec)
	// This host's own change, echoed: its generations already show it,
	// and may show a later local change (a lift right after a tombstone)
	// that re-applying the echo would undo until that change's own echo.
	own := ev.Type == mvccpb.PUT && rec.Host == m.cfg.HostID
	if err := m.st.Apply(id, value, ev.Kv.ModRevision, own); err != nil {
		return fmt.Errorf("apply fleet tombstone %s at revision %d: %w", id, ev.Kv.ModRevision, err)
	}
	what := "lifted"
	if value != nil {
		what = "tombstoned"
	}
	m.log.Info("fleet: "+what, "fleet_id", id, "revision", ev.Kv.ModRevision, "by_host", rec.Host, "by_hostname", rec.Hostname, "reason", rec.Reason)
	return nil
}
