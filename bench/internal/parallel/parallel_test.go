package parallel

import (
	"errors"
	"sync"
	"testing"
)

// TestRateCallsEachIndexOnce: every index once, from callers numbered
// from 0.
func TestRateCallsEachIndexOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	bad := 0
	rate, err := Rate(7, 1000, func(caller, i int) error {
		mu.Lock()
		seen[i]++
		if caller < 0 || caller >= 7 {
			bad++
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Errorf("rate %v, want > 0", rate)
	}
	if bad > 0 {
		t.Errorf("%d calls from a caller outside [0, 7)", bad)
	}
	if len(seen) != 1000 {
		t.Errorf("%d distinct indexes called, want 1000", len(seen))
	}
	for i, k := range seen {
		if i < 0 || i >= 1000 || k != 1 {
			t.Errorf("index %d called %d times", i, k)
		}
	}
}

// TestRateStopsAtTheFirstError: the error is returned and no caller goes
// on to the end.
func TestRateStopsAtTheFirstError(t *testing.T) {
	bad := errors.New("bad")
	var mu sync.Mutex
	calls := 0
	_, err := Rate(4, 1_000_000, func(_, i int) error {
		mu.Lock()
		calls++
		mu.Unlock()
		if i == 10 {
			return bad
		}
		return nil
	})
	if !errors.Is(err, bad) {
		t.Fatalf("err %v, want %v", err, bad)
	}
	if calls >= 1_000_000 {
		t.Errorf("%d calls after an error at index 10: the callers did not stop", calls)
	}
}
