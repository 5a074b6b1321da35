package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/store/manifest"
)

// Sources of a capture's UTC anchor (TimeAnchors.Source).
const (
	// AnchorTimeContract: the v6 time contract (contract field 31),
	// with host identity and a monotonic anchor.
	AnchorTimeContract = "time_contract"
	// AnchorCaptureWallClock: the v5 machine contract's
	// capture_wall_clock (field 11); UTC only.
	AnchorCaptureWallClock = "capture_wall_clock"
	// AnchorCreatedAt: the manifest's created_at, for a capture without
	// a time anchor (a standard machine); UTC only.
	AnchorCreatedAt = "created_at"
)

// TimeAnchors are a capture's time anchors, copied from its manifest at
// publication (openvmm-snapshot-format.md §3.1). Only a time contract
// carries host identity and a monotonic anchor; other sources leave those
// fields zero.
type TimeAnchors struct {
	Source            string            // AnchorTimeContract, AnchorCaptureWallClock or AnchorCreatedAt
	UTC               time.Time         // field 6 capture_utc_ns, else the v5 capture wall clock or created_at
	MonotonicNs       uint64            // field 7 capture_monotonic_ns, on HostClock
	HostClock         string            // field 8 host_clock: linux-boottime or windows-interrupt-time
	HostID            [16]byte          // field 9 host_id
	BootID            [16]byte          // field 10 host_boot_id
	CaptureGeneration CaptureGeneration // field 11 capture_generation, the lineage counter
}

// hasHost reports whether the anchors carry host identity and a
// monotonic anchor (a v6 time contract).
func (a TimeAnchors) hasHost() bool { return a.Source == AnchorTimeContract }

type anchorsJSON struct {
	Source            string            `json:"source"`
	UTC               time.Time         `json:"capture_utc"`
	MonotonicNs       uint64            `json:"capture_monotonic_ns,omitempty"`
	HostClock         string            `json:"host_clock,omitempty"`
	HostID            string            `json:"host_id,omitempty"`
	BootID            string            `json:"host_boot_id,omitempty"`
	CaptureGeneration CaptureGeneration `json:"capture_generation"`
}

// MarshalJSON writes the host and boot IDs as 32 lowercase hex digits.
func (a TimeAnchors) MarshalJSON() ([]byte, error) {
	j := anchorsJSON{Source: a.Source, UTC: a.UTC, MonotonicNs: a.MonotonicNs, HostClock: a.HostClock, CaptureGeneration: a.CaptureGeneration}
	if a.hasHost() {
		j.HostID, j.BootID = hex.EncodeToString(a.HostID[:]), hex.EncodeToString(a.BootID[:])
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (a *TimeAnchors) UnmarshalJSON(data []byte) error {
	var j anchorsJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*a = TimeAnchors{Source: j.Source, UTC: j.UTC, MonotonicNs: j.MonotonicNs, HostClock: j.HostClock, CaptureGeneration: j.CaptureGeneration}
	for _, f := range []struct {
		text string
		out  *[16]byte
	}{{j.HostID, &a.HostID}, {j.BootID, &a.BootID}} {
		if f.text != "" {
			if err := parseHex16("time anchor", []byte(f.text), f.out); err != nil {
				return err
			}
		}
	}
	return nil
}

// anchorsOf takes the anchors from a validated manifest: the time
// contract if present, else the v5 capture wall clock, else created_at.
func anchorsOf(m *manifest.Manifest) TimeAnchors {
	if c := m.Contract; c != nil {
		if t := c.Time; t != nil {
			a := TimeAnchors{
				Source:            AnchorTimeContract,
				UTC:               time.Unix(0, int64(t.CaptureUTCNs)).UTC(),
				MonotonicNs:       t.CaptureMonotonicNs,
				HostClock:         t.HostClock,
				CaptureGeneration: CaptureGeneration(t.CaptureGeneration),
			}
			copy(a.HostID[:], t.HostID)
			copy(a.BootID[:], t.HostBootID)
			return a
		}
		if ts := c.CaptureWallClock; ts.Seconds != 0 || ts.Nanos != 0 {
			return TimeAnchors{Source: AnchorCaptureWallClock, UTC: time.Unix(ts.Seconds, int64(ts.Nanos)).UTC()}
		}
	}
	return TimeAnchors{Source: AnchorCreatedAt, UTC: time.Unix(m.CreatedAt.Seconds, int64(m.CreatedAt.Nanos)).UTC()}
}

// Rules by which a generation's age is measured (Eligibility.Rule).
const (
	// RuleSameBoot: host ID, boot ID and clock kind all match this host;
	// age = host monotonic clock - capture_monotonic_ns.
	RuleSameBoot = "same-boot monotonic"
	// RuleUTC: anything else (reboot, other host, other clock kind, no
	// time contract); age = UTC now - the capture's UTC anchor.
	RuleUTC = "utc"
)

// Eligibility says whether a generation may get new leases now, by its
// restore window alone; the generation's state (tombstoned, retiring) is
// a separate refusal.
type Eligibility struct {
	Eligible bool
	// Reason is one human line for status files, for example
	// "ineligible: restore window of 24h passed 3h ago" or
	// "eligible: 21h left of the 24h restore window".
	Reason string
	Rule   string        // RuleSameBoot or RuleUTC
	Age    time.Duration // by Rule; negative when the capture is in this host's future
	Window time.Duration // the store's Settings.RestoreWindow
}

// Eligibility decides whether generation gen is inside its restore window
// now, from this host's facts and the store's settings. Errors:
// ErrNotFound, the host's read error, ErrInvalidSettings.
func (s *Store) Eligibility(gen GenerationID) (Eligibility, error) {
	facts, err := s.host.Facts()
	if err != nil {
		return Eligibility{}, fmt.Errorf("eligibility of %s: read host facts: %w", gen, err)
	}
	var e Eligibility
	err = s.db.View(func(tx *bolt.Tx) error {
		g, err := getGeneration(tx, gen)
		if err != nil {
			return err
		}
		set, err := readSettings(tx)
		if err != nil {
			return err
		}
		e = evaluate(g.Anchors, facts, set)
		return nil
	})
	return e, err
}

// evaluate applies openvmm-snapshot-format.md §7.2 (v6) and §7.1 (v5,
// UTC only): the store's reboot and other-host policies, then, for a
// capture of this boot, anchor agreement (anchorDisagreement within the
// window), then 0 <= age <= window. The boundaries are inclusive, as
// OpenVMM's are.
func evaluate(a TimeAnchors, h HostFacts, set Settings) Eligibility {
	e := Eligibility{Rule: RuleUTC, Window: set.RestoreWindow}
	sameHost := a.hasHost() && a.HostID == h.HostID
	sameBoot := sameHost && a.BootID == h.BootID
	disagreement, thisBoot := anchorDisagreement(a, h)
	if thisBoot {
		e.Rule, e.Age = RuleSameBoot, monotonicAge(h.MonotonicNs, a.MonotonicNs)
	} else {
		e.Age = h.UTC.Sub(a.UTC)
	}
	switch {
	case set.RefuseOtherHost && !a.hasHost():
		e.Reason = "ineligible: the capture records no host identity and the store refuses other hosts"
	case set.RefuseOtherHost && !sameHost:
		e.Reason = fmt.Sprintf("ineligible: captured on host %x and the store refuses other hosts", a.HostID)
	case set.RefuseReboot && !a.hasHost():
		e.Reason = "ineligible: the capture records no boot identity and the store refuses reboots"
	case set.RefuseReboot && sameHost && !sameBoot:
		e.Reason = fmt.Sprintf("ineligible: captured before a reboot (boot %x) and the store refuses reboots", a.BootID)
	case thisBoot && disagreement > e.Window:
		e.Reason = fmt.Sprintf("ineligible: the capture's wall-clock and monotonic anchors disagree by %s, more than the %s restore window",
			shortDuration(disagreement.Round(time.Second)), shortDuration(e.Window))
	case e.Age < 0:
		e.Reason = fmt.Sprintf("ineligible: captured %s in this host's future (%s clock)", shortDuration(-e.Age), e.Rule)
	case e.Age > e.Window:
		e.Reason = fmt.Sprintf("ineligible: restore window of %s passed %s ago", shortDuration(e.Window), shortDuration(e.Age-e.Window))
	default:
		e.Eligible = true
		e.Reason = fmt.Sprintf("eligible: %s left of the %s restore window", shortDuration(e.Window-e.Age), shortDuration(e.Window))
	}
	return e
}

// anchorDisagreement compares a capture's two ages on this host: by the
// wall clock (host UTC - capture UTC) and by the monotonic clock (host
// monotonic - capture monotonic). They can be compared only for a capture
// made in this boot of this host with this clock kind (thisBoot, the same
// test as RuleSameBoot); then they differ only by wall-clock steps since
// the capture, and a difference larger than the restore window means one
// anchor is not what it claims. The difference saturates at the Duration
// range.
func anchorDisagreement(a TimeAnchors, h HostFacts) (disagreement time.Duration, thisBoot bool) {
	if !a.hasHost() || a.HostID != h.HostID || a.BootID != h.BootID || a.HostClock != h.HostClock {
		return 0, false
	}
	wall, mono := h.UTC.Sub(a.UTC), monotonicAge(h.MonotonicNs, a.MonotonicNs)
	if wall < mono {
		wall, mono = mono, wall
	}
	if mono < 0 && wall > math.MaxInt64+mono {
		return math.MaxInt64, true
	}
	return wall - mono, true
}

// checkAnchorAgreement refuses a capture of this boot whose anchors
// disagree (anchorDisagreement) by more than the store's restore window,
// naming both anchors and both ages. Errors: that refusal,
// ErrInvalidSettings, the index's read error.
func (s *Store) checkAnchorAgreement(a TimeAnchors, h HostFacts) error {
	d, thisBoot := anchorDisagreement(a, h)
	if !thisBoot {
		return nil
	}
	var set Settings
	if err := s.db.View(func(tx *bolt.Tx) (err error) {
		set, err = readSettings(tx)
		return err
	}); err != nil {
		return err
	}
	if d <= set.RestoreWindow {
		return nil
	}
	return fmt.Errorf("time.capture_utc_ns %s and time.capture_monotonic_ns %d disagree: on this host's boot the capture is %s old by the wall clock and %s by the monotonic clock, %s apart, more than the %s restore window",
		a.UTC.Format(time.RFC3339Nano), a.MonotonicNs, shortDuration(h.UTC.Sub(a.UTC)), shortDuration(monotonicAge(h.MonotonicNs, a.MonotonicNs)),
		shortDuration(d), shortDuration(set.RestoreWindow))
}

// detail is Reason without its "ineligible: " prefix, for error texts.
func (e Eligibility) detail() string { return strings.TrimPrefix(e.Reason, "ineligible: ") }

// monotonicAge is now - anchor as a Duration, saturating at its range.
func monotonicAge(now, anchor uint64) time.Duration {
	if now >= anchor {
		return time.Duration(min(now-anchor, math.MaxInt64))
	}
	return -time.Duration(min(anchor-now, math.MaxInt64))
}

// shortDuration renders d as Duration.String does, without zero minute
// and second units: "24h", "1h30m", "1ns".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// leasable refuses a generation that may not get new leases by state.
func leasable(g Generation) error {
	switch g.State {
	case Published:
		return nil
	case Retiring:
		return fmt.Errorf("generation %s: %w", g.ID, ErrRetiring)
	default:
		return fmt.Errorf("generation %s: %w", g.ID, ErrTombstoned)
	}
}

// checkEligible refuses g unless it may get a new lease now: published
// (leasable) and inside its restore window (evaluate).
func checkEligible(tx *bolt.Tx, g Generation, facts HostFacts, factsErr error) error {
	if err := leasable(g); err != nil {
		return err
	}
	if factsErr != nil {
		return fmt.Errorf("read host facts: %w", factsErr)
	}
	set, err := readSettings(tx)
	if err != nil {
		return err
	}
	if e := evaluate(g.Anchors, facts, set); !e.Eligible {
		return fmt.Errorf("generation %s: %w: %s", g.ID, ErrIneligible, e.detail())
	}
	return nil
}
