package manifest

import "time"

// Valid reports whether t converts to a time: nanos within
// 0..999,999,999 (openvmm-snapshot-format.md §5.3, capture_wall_clock).
func (t Timestamp) Valid() bool {
	return t.Nanos >= 0 && t.Nanos <= 999_999_999
}

// Time returns t as a UTC time. The result is meaningful only if t.Valid().
func (t Timestamp) Time() time.Time {
	return time.Unix(t.Seconds, int64(t.Nanos)).UTC()
}

// timestampOf converts a time to its Timestamp.
func timestampOf(t time.Time) Timestamp {
	return Timestamp{Seconds: t.Unix(), Nanos: int32(t.Nanosecond())}
}
