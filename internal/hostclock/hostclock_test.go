package hostclock

import (
	"os"
	"testing"
	"time"
)

// TestSkewApplied fails a run that sets SkewEnv without the clockskew tag
// (the clock would silently stay where it is) and checks that a tagged run
// moves Now by exactly the skew.
func TestSkewApplied(t *testing.T) {
	v := os.Getenv(SkewEnv)
	if v != "" && !Tagged {
		t.Fatalf("%s=%s is set but this build lacks the clockskew tag: the clock is not moved", SkewEnv, v)
	}
	want := time.Duration(0)
	if v != "" {
		var err error
		if want, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	if Skew() != want {
		t.Fatalf("Skew() = %v, want %v", Skew(), want)
	}
	before := time.Now()
	got := Now()
	after := time.Now()
	if got.Before(before.Add(want)) || got.After(after.Add(want)) {
		t.Fatalf("Now() = %v, want between %v and %v", got, before.Add(want), after.Add(want))
	}
}
