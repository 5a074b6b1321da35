package manifest

import (
	"math"
	"time"
)

// The sane range of a manifest's calendar times: created_at (§2.2 field 2),
// the v5 capture_wall_clock (§2.3 field 11) and the v6 capture_utc_ns (§3.1
// field 6). OpenVMM writes each from the host's wall clock at capture, so
// none can be older than the format, and none can lie ahead of the clock of
// the host that publishes it by more than clock disagreement between hosts.
var (
	// MinCaptureTime is the earliest calendar time a manifest may carry.
	MinCaptureTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	// minCalendarTime and maxCalendarTime bound Timestamp seconds before
	// they are converted, so that no conversion overflows (time.Time counts
	// from year 1) and errors print four-digit years.
	minCalendarTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxCalendarTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// MaxAheadOfHost is how far a calendar time of a manifest may be ahead of
// the host's UTC clock (ValidateAt).
const MaxAheadOfHost = 24 * time.Hour

// calendarTime is one calendar time of a manifest, named as in errors.
type calendarTime struct {
	name string
	t    time.Time
}

// calendarTimes returns m's calendar times, refusing any that is a sentinel
// (i64::MAX, i64::MIN, u64::MAX), outside its wire type's range as a time,
// or before MinCaptureTime. m's contract must already have passed
// validateContract, so a v6 contract has its time contract.
func (m *Manifest) calendarTimes() ([]calendarTime, error) {
	const created = "manifest.created_at"
	t, err := timestampTime(created, m.CreatedAt)
	if err != nil {
		return nil, err
	}
	out := []calendarTime{{created, t}}
	c := m.Contract
	switch {
	case c == nil:
	case m.Version == Version5:
		const name = contractPath + ".capture_wall_clock"
		t, err := timestampTime(name, c.CaptureWallClock)
		if err != nil {
			return nil, err
		}
		out = append(out, calendarTime{name, t})
	case c.Time != nil:
		const name = contractPath + ".time.capture_utc_ns"
		t, err := nanosTime(name, c.Time.CaptureUTCNs)
		if err != nil {
			return nil, err
		}
		out = append(out, calendarTime{name, t})
		if err := checkAnchorCounters(c.Time); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkAnchorCounters refuses sentinels in the time contract's monotonic
// and TSC anchors, and a monotonic anchor beyond the int64 nanoseconds the
// store measures ages in.
func checkAnchorCounters(t *TimeContract) error {
	for _, f := range []struct {
		name string
		v    uint64
	}{
		{"capture_monotonic_ns", t.CaptureMonotonicNs},
		{"capture_tsc", t.CaptureTSC},
	} {
		if s := sentinel(f.v); s != "" {
			return invalidf("%s.time.%s %d is %s, a sentinel, not an anchor", contractPath, f.name, f.v, s)
		}
	}
	if v := t.CaptureMonotonicNs; v > math.MaxInt64 {
		return invalidf("%s.time.capture_monotonic_ns %d exceeds the int64 nanosecond range", contractPath, v)
	}
	return nil
}

// timestampTime converts a Timestamp field to a time in the sane range.
func timestampTime(name string, ts Timestamp) (time.Time, error) {
	switch {
	case ts.Seconds == math.MaxInt64:
		return time.Time{}, invalidf("%s.seconds %d is i64::MAX, a sentinel, not a time", name, ts.Seconds)
	case ts.Seconds == math.MinInt64:
		return time.Time{}, invalidf("%s.seconds %d is i64::MIN, a sentinel, not a time", name, ts.Seconds)
	case !ts.Valid():
		return time.Time{}, invalidf("%s.nanos %d outside 0..999999999", name, ts.Nanos)
	case ts.Seconds > maxCalendarTime.Unix():
		return time.Time{}, invalidf("%s.seconds %d is after %s", name, ts.Seconds, maxCalendarTime.Format(time.RFC3339))
	case ts.Seconds < minCalendarTime.Unix():
		return time.Time{}, invalidf("%s.seconds %d is before %s", name, ts.Seconds, MinCaptureTime.Format(time.RFC3339))
	}
	return checkMinTime(name, ts.Time())
}

// nanosTime converts a u64 nanoseconds-since-the-epoch field to a time in
// the sane range.
func nanosTime(name string, ns uint64) (time.Time, error) {
	if s := sentinel(ns); s != "" {
		return time.Time{}, invalidf("%s %d is %s, a sentinel, not a time", name, ns, s)
	}
	if ns > math.MaxInt64 {
		return time.Time{}, invalidf("%s %d exceeds the int64 nanosecond range", name, ns)
	}
	return checkMinTime(name, time.Unix(0, int64(ns)).UTC())
}

func checkMinTime(name string, t time.Time) (time.Time, error) {
	if t.Before(MinCaptureTime) {
		return time.Time{}, invalidf("%s %s is before %s", name, t.Format(time.RFC3339Nano), MinCaptureTime.Format(time.RFC3339))
	}
	return t, nil
}

// sentinel names v if it is an all-ones marker rather than a value.
func sentinel(v uint64) string {
	switch v {
	case math.MaxUint64:
		return "u64::MAX"
	case math.MaxInt64:
		return "i64::MAX"
	}
	return ""
}

// ValidateAt is Validate plus the one rule that needs the host's clock:
// no calendar time of m (created_at, capture_wall_clock, capture_utc_ns)
// is more than MaxAheadOfHost after now, the host's UTC clock. The caller
// passes now (the store passes its host's facts); this package never reads
// the clock. Errors are Validate's, or ErrInvalid naming the field, its
// time and now.
func (m *Manifest) ValidateAt(now time.Time) error {
	if err := m.Validate(); err != nil {
		return err
	}
	times, err := m.calendarTimes()
	if err != nil {
		return err
	}
	limit := now.Add(MaxAheadOfHost)
	for _, ct := range times {
		if ct.t.After(limit) {
			return invalidf("%s %s is more than %v ahead of the host's clock (%s)", ct.name,
				ct.t.Format(time.RFC3339Nano), MaxAheadOfHost, now.UTC().Format(time.RFC3339Nano))
		}
	}
	return nil
}
