package leasefs

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"templatefs/internal/hostclock"
	"templatefs/store"
	"templatefs/store/manifest"
)

// content renders a text, lease or ctl file (ContentText, ContentCommands)
// with its kind's render. Texts are small and rendered on every getattr and
// open, so a file never shows stale data.
func (f *FS) content(n Node) ([]byte, error) {
	r := n.kind.facts()
	if r.content != ContentText && r.content != ContentCommands {
		return nil, fmt.Errorf("render %s: not a text file", n)
	}
	v, err := r.render(f, n)
	return v.text, err
}

// The renders of the node table (kindFacts.render): each reads the
// records the node shows and fails with store.ErrNotFound once they are
// gone.

func (f *FS) storeView(Node) (view, error) {
	text, changed, err := f.renderStore()
	return view{text, changed, changed}, err
}

// keyView is a key directory's, its leases directory's and its key
// file's: the key's creation; the key file's text is the canonical key.
func (f *FS) keyView(n Node) (view, error) {
	k, err := f.key(n)
	if err != nil {
		return view{}, err
	}
	v := at(k.CreatedAt)
	if n.kind == KindKeyFile {
		v.text = []byte(k.Canonical)
	}
	return v, nil
}

func (f *FS) keyGenerationsView(n Node) (view, error) {
	text, newest, err := f.renderKeyGenerations(n)
	return view{text, newest, newest}, err
}

// generationView is a generation-scoped directory's: its publication.
func (f *FS) generationView(n Node) (view, error) {
	g, err := f.st.Generation(n.Generation())
	if err != nil {
		return view{}, err
	}
	return at(g.PublishedAt), nil
}

// generationDirView is generationView, but a tombstoned generation's
// ctime is its tombstone's time: the rename into tombstones/ changed it.
func (f *FS) generationDirView(n Node) (view, error) {
	g, err := f.st.Generation(n.Generation())
	if err != nil {
		return view{}, err
	}
	v := at(g.PublishedAt)
	if t := g.Tombstone; t != nil {
		v.ctime = t.At
	}
	return v, nil
}

func (f *FS) manifestView(n Node) (view, error) {
	v, err := f.generationView(n)
	if err != nil {
		return view{}, err
	}
	v.text, err = f.renderManifest(n.Generation())
	return v, err
}

func (f *FS) ctlView(n Node) (view, error) {
	v, err := f.generationView(n)
	v.text = ctlText
	return v, err
}

func (f *FS) statusView(n Node) (view, error) {
	g, err := f.st.Generation(n.Generation())
	if err != nil {
		return view{}, err
	}
	text, changed, err := f.renderStatus(g)
	return view{text, changed, changed}, err
}

func (f *FS) leaseView(n Node) (view, error) {
	l, err := f.lease(n)
	if err != nil {
		return view{}, err
	}
	text, err := renderLease(l)
	return view{text, leaseChanged(l), leaseChanged(l)}, err
}

// kv writes "key: value" lines.
type kv struct{ b strings.Builder }

func (w *kv) line(key string, value any) {
	if t, ok := value.(time.Time); ok {
		value = t.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(&w.b, "%s: %v\n", key, value)
}

// renderStore renders MNT/store: identity, schema, counts, the
// eligibility settings and whether the store is read-only (and why). It
// also returns when any of them last changed (store.Info.ChangedAt, or
// when the store became read-only), the file's mtime. A read-only store
// whose index cannot be read shows only the read_only line, so the reason
// stays visible.
func (f *FS) renderStore() ([]byte, time.Time, error) {
	info, err := f.st.Info()
	readOnly, readOnlySince := "no", f.st.ReadOnlySince()
	if ro := f.st.ReadOnly(); ro != nil { // read after Info, which may have found the damage
		readOnly = ro.Error()
	}
	if err != nil {
		if readOnly != "no" {
			return []byte("read_only: " + readOnly + "\n"), readOnlySince, nil
		}
		return nil, time.Time{}, err
	}
	var w kv
	w.line("store_id", info.StoreID)
	if info.RestoredFrom == "" {
		info.RestoredFrom = "none"
	}
	w.line("restored_from", info.RestoredFrom)
	w.line("schema_identity", info.SchemaIdentity)
	w.line("schema_version", info.SchemaVersion)
	w.line("created_at", info.CreatedAt)
	w.line("generations", info.Generations)
	w.line("published", info.Generations-info.Tombstoned-info.Retiring)
	w.line("tombstoned", info.Tombstoned)
	w.line("retiring", info.Retiring)
	w.line("keys", info.Keys)
	w.line("leases", info.Leases)
	w.line("restore_window", info.Settings.RestoreWindow)
	w.line("refuse_reboot", info.Settings.RefuseReboot)
	w.line("refuse_other_host", info.Settings.RefuseOtherHost)
	w.line("read_only", readOnly)
	if f.storeLines != nil {
		for _, l := range f.storeLines() {
			w.b.WriteString(l + "\n")
		}
	}
	return []byte(w.b.String()), latest(info.ChangedAt, readOnlySince), nil
}

// renderKeyGenerations renders keys/<id>/generations: generation IDs,
// newest first, one per line. It also returns when the list last
// changed, the file's mtime: the newest generation's publication or the
// last deletion of a retired one, whichever is later.
func (f *FS) renderKeyGenerations(n Node) ([]byte, time.Time, error) {
	k, err := f.key(n)
	if err != nil {
		return nil, time.Time{}, err
	}
	ids, err := f.st.KeyGenerations(n.name)
	if err != nil {
		return nil, time.Time{}, err
	}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id.String())
		b.WriteByte('\n')
	}
	newest := k.CreatedAt // every generation of the key has been retired
	if len(ids) > 0 {
		g, err := f.st.Generation(ids[0])
		if err != nil {
			return nil, time.Time{}, err
		}
		newest = g.PublishedAt
	}
	if k.GenerationRemovedAt.After(newest) {
		newest = k.GenerationRemovedAt
	}
	return []byte(b.String()), newest, nil
}

// renderManifest decodes the generation's published manifest.bin (bounded
// by manifest.MaxManifestSize, enforced by Decode) and renders its text.
func (f *FS) renderManifest(gen store.GenerationID) ([]byte, error) {
	file, err := f.st.OpenPayload(gen, manifest.ManifestFileName)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	raw, err := io.ReadAll(io.LimitReader(file, manifest.MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("read generation %s manifest.bin: %w", gen, err)
	}
	m, err := manifest.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("decode generation %s manifest.bin: %w", gen, err)
	}
	return []byte(m.Text()), nil
}

// renderStatus renders <gen>/status: the state first, then the record's
// times, the restore-window verdict (store.Eligibility), whether a new
// lease would be granted, with the errno and reason of a refusal, and the
// generation's last refused mutation (refusals.go; "none" after a daemon
// restart). A verdict that cannot be computed (host facts unreadable) is
// shown, not returned, so status stays readable. It also returns when
// what the text shows last changed, the file's mtime: the record's last
// change (store.Generation.LastChange), the last lease granted or
// released (store.LeasesChangedAt), the store's settings, the last
// refusal, and the end of the restore window once it
// has passed (the verdict flips with the clock alone).
func (f *FS) renderStatus(g store.Generation) ([]byte, time.Time, error) {
	leases, err := f.st.GenerationLeases(g.ID)
	if err != nil {
		return nil, time.Time{}, err
	}
	settingsChanged, err := f.st.SettingsChangedAt()
	if err != nil {
		return nil, time.Time{}, err
	}
	leasesChanged, err := f.st.LeasesChangedAt(g.ID)
	if err != nil {
		return nil, time.Time{}, err
	}
	changed := latest(g.LastChange(), leasesChanged, settingsChanged)
	var w kv
	w.line("state", g.State)
	w.line("generation", g.ID)
	w.line("key_id", g.KeyID)
	w.line("fleet_id", g.FleetID())
	w.line("published_at", g.PublishedAt)
	w.line("captured_at", g.CaptureTime)
	if t := g.Tombstone; t != nil {
		w.line("tombstoned_at", t.At)
		w.line("tombstoned_by_uid", t.UID)
	}
	if r := g.Retirement; r != nil {
		w.line("retiring_at", r.At)
		w.line("retiring_by_uid", r.UID)
	}
	w.line("leases", len(leases))
	e, eerr := f.st.Eligibility(g.ID)
	var refusal error
	switch {
	case g.State == store.Retiring:
		refusal = store.ErrRetiring
	case g.State != store.Published:
		refusal = store.ErrTombstoned
	case eerr != nil:
		refusal = eerr
	case !e.Eligible:
		refusal = fmt.Errorf("%w: %s", store.ErrIneligible, ineligibleReason(g, e))
	}
	if eerr != nil {
		w.line("eligible", "unknown: "+eerr.Error())
	} else {
		w.line("eligible", e.Eligible)
		w.line("eligibility_rule", e.Rule)
		w.line("restore_window", e.Window)
		w.line("window_ends_at", windowEnds(g, e))
		if end := windowEnds(g, e); !e.Eligible && !end.After(hostclock.Now()) {
			changed = latest(changed, end)
		}
	}
	if refusal == nil {
		w.line("new_leases", "granted")
	} else {
		w.line("new_leases", fmt.Sprintf("refused (%s): %v", ToErrno(refusal), refusal))
	}
	if r, ok := f.refusals.get(g.ID); ok {
		w.line("last_refusal", r)
		changed = latest(changed, r.at)
	} else {
		w.line("last_refusal", "none")
	}
	return []byte(w.b.String()), changed, nil
}

// latest returns the latest of ts.
func latest(ts ...time.Time) time.Time {
	var t time.Time
	for _, c := range ts {
		if c.After(t) {
			t = c
		}
	}
	return t
}

// windowEnds is when g's restore window closes: its UTC anchor plus the
// window under the UTC rule (a fixed instant), else now plus what is left
// of the window on the monotonic clock, rounded to the second. Status
// shows this instead of the growing age, so its text, and the size stat
// reports, stay the same between a stat and a read.
func windowEnds(g store.Generation, e store.Eligibility) time.Time {
	if e.Rule == store.RuleUTC {
		return g.Anchors.UTC.Add(e.Window)
	}
	return hostclock.Now().Add(e.Window - e.Age).Round(time.Second)
}

// ineligibleReason says why e refuses g, without durations that grow with
// the clock.
func ineligibleReason(g store.Generation, e store.Eligibility) string {
	switch {
	case e.Age > e.Window:
		return fmt.Sprintf("restore window of %v ended at %s", e.Window, windowEnds(g, e).UTC().Format(time.RFC3339Nano))
	case e.Age < 0:
		return fmt.Sprintf("captured in this host's future (%s rule)", e.Rule)
	}
	return strings.TrimPrefix(e.Reason, "ineligible: ")
}

// leaseChanged is when lease l last changed: its acquisition, binding or
// last state change.
func leaseChanged(l store.Lease) time.Time { return latest(l.CreatedAt, l.BoundAt, l.UpdatedAt) }

// renderLease renders a lease file: the record as one JSON object and a
// newline.
func renderLease(l store.Lease) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("encode lease %q: %w", l.CloneID, err)
	}
	return append(b, '\n'), nil
}
