package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"templatefs/store"
)

func TestEligibilityBoundaries(t *testing.T) {
	const day = 24 * time.Hour
	window := store.Settings{RestoreWindow: day}
	_, st, host := openStore(t)
	v6 := publish(t, st, makeCaptureVersion(t, 6, 1))
	v5 := publishVersion(t, st, 5, 2)
	if v5.ManifestVersion != 5 || v6.ManifestVersion != 6 {
		t.Fatalf("manifest versions %d and %d, want 5 and 6", v5.ManifestVersion, v6.ManifestVersion)
	}
	tests := []struct {
		name   string
		gen    store.Generation
		set    store.Settings
		facts  store.HostFacts
		ok     bool
		rule   string
		reason string // a substring of Eligibility.Reason
	}{
		{"same boot, age 0", v6, window, sameBoot(0), true, store.RuleSameBoot, "eligible: 24h left of the 24h restore window"},
		{"same boot, age -1ns", v6, window, sameBoot(-1), false, store.RuleSameBoot, "captured 1ns in this host's future"},
		{"same boot, age = window", v6, window, sameBoot(day), true, store.RuleSameBoot, "eligible: 0s left"},
		{"same boot, age = window+1ns", v6, window, sameBoot(day + 1), false, store.RuleSameBoot, "restore window of 24h passed 1ns ago"},
		{"same boot, default window", v6, store.DefaultSettings(), sameBoot(30 * day), true, store.RuleSameBoot, "of the 720h restore window"},
		{"same boot, default window+1ns", v6, store.DefaultSettings(), sameBoot(30*day + 1), false, store.RuleSameBoot, "restore window of 720h passed 1ns ago"},
		{"reboot, age 0", v6, window, afterReboot(0), true, store.RuleUTC, "eligible"},
		{"reboot, age -1ns", v6, window, afterReboot(-1), false, store.RuleUTC, "captured 1ns in this host's future (utc clock)"},
		{"reboot, age = window", v6, window, afterReboot(day), true, store.RuleUTC, "eligible"},
		{"reboot, age = window+1ns", v6, window, afterReboot(day + 1), false, store.RuleUTC, "passed 1ns ago"},
		{"reboot, status example", v6, window, afterReboot(27 * time.Hour), false, store.RuleUTC, "ineligible: restore window of 24h passed 3h ago"},
		{"other host, age = window", v6, window, otherHost(day), true, store.RuleUTC, "eligible"},
		{"other host, age = window+1ns", v6, window, otherHost(day + 1), false, store.RuleUTC, "passed 1ns ago"},
		{"other clock kind, age = window", v6, window, otherClock(day), true, store.RuleUTC, "eligible"},
		{"other clock kind, age -1ns", v6, window, otherClock(-1), false, store.RuleUTC, "in this host's future"},
		{"refuse reboot, reboot", v6, store.Settings{RestoreWindow: day, RefuseReboot: true}, afterReboot(time.Hour), false, store.RuleUTC, "captured before a reboot"},
		{"refuse reboot, same boot", v6, store.Settings{RestoreWindow: day, RefuseReboot: true}, sameBoot(time.Hour), true, store.RuleSameBoot, "eligible"},
		{"refuse reboot, other host", v6, store.Settings{RestoreWindow: day, RefuseReboot: true}, otherHost(time.Hour), true, store.RuleUTC, "eligible"},
		{"refuse other host, other host", v6, store.Settings{RestoreWindow: day, RefuseOtherHost: true}, otherHost(time.Hour), false, store.RuleUTC, "captured on host 01010101010101010101010101010101 and the store refuses other hosts"},
		{"refuse other host, reboot", v6, store.Settings{RestoreWindow: day, RefuseOtherHost: true}, afterReboot(time.Hour), true, store.RuleUTC, "eligible"},
		// v5 has only a capture wall clock: the UTC rule, even on the capture's own boot.
		{"v5, same boot facts, age = window", v5, window, otherClock(day), true, store.RuleUTC, "eligible"},
		{"v5, same boot facts, age = window+1ns", v5, window, afterReboot(day + 1), false, store.RuleUTC, "passed 1ns ago"},
		{"v5, monotonic says 0, UTC says window+1ns", v5, window, store.HostFacts{HostID: hostA, BootID: bootA, HostClock: "linux-boottime", MonotonicNs: captureMono, UTC: captureUTC.Add(day + 1)}, false, store.RuleUTC, "passed 1ns ago"},
		{"v5, age 0", v5, window, afterReboot(0), true, store.RuleUTC, "eligible"},
		{"v5, age -1ns", v5, window, afterReboot(-1), false, store.RuleUTC, "in this host's future"},
		{"v5, refuse reboot", v5, store.Settings{RestoreWindow: day, RefuseReboot: true}, afterReboot(time.Hour), false, store.RuleUTC, "records no boot identity"},
		{"v5, refuse other host", v5, store.Settings{RestoreWindow: day, RefuseOtherHost: true}, afterReboot(time.Hour), false, store.RuleUTC, "records no host identity"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := st.SetSettings(tt.set); err != nil {
				t.Fatal(err)
			}
			host.set(tt.facts)
			e, err := st.Eligibility(tt.gen.ID)
			if err != nil {
				t.Fatal(err)
			}
			if e.Eligible != tt.ok || e.Rule != tt.rule || !strings.Contains(e.Reason, tt.reason) || e.Window != tt.set.RestoreWindow {
				t.Errorf("Eligibility = %+v; want eligible %v, rule %q, reason containing %q", e, tt.ok, tt.rule, tt.reason)
			}
			clone := fmt.Sprintf("clone-%d", i)
			l, created, err := st.AcquireLease(tt.gen.ID, clone)
			switch {
			case tt.ok && (err != nil || !created || l.Generation != tt.gen.ID):
				t.Errorf("AcquireLease = %+v, %v, %v; want a new lease on %s", l, created, err, tt.gen.ID)
			case !tt.ok && (!errors.Is(err, store.ErrIneligible) || !strings.Contains(err.Error(), strings.TrimPrefix(tt.reason, "ineligible: "))):
				t.Errorf("AcquireLease: got %v, want ErrIneligible giving %q", err, tt.reason)
			}
		})
	}
}

func TestEligibilityAges(t *testing.T) {
	_, st, host := openStore(t)
	g := publish(t, st, makeCaptureVersion(t, 6, 1))
	for _, age := range []time.Duration{-time.Minute, 0, 90 * time.Minute} {
		host.set(sameBoot(age))
		if e, err := st.Eligibility(g.ID); err != nil || e.Age != age {
			t.Errorf("same boot %v: Eligibility = %+v, %v; want age %v", age, e, err, age)
		}
		host.set(afterReboot(age))
		if e, err := st.Eligibility(g.ID); err != nil || e.Age != age {
			t.Errorf("reboot %v: Eligibility = %+v, %v; want age %v", age, e, err, age)
		}
	}
	if _, err := st.Eligibility(99); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown generation: got %v, want ErrNotFound", err)
	}
}

func TestAcquireLeaseRetryAndHostFailure(t *testing.T) {
	_, st, host := openStore(t)
	g := publish(t, st, makeCaptureVersion(t, 6, 1))
	l, _, err := st.AcquireLease(g.ID, "clone-a")
	if err != nil {
		t.Fatal(err)
	}
	host.set(afterReboot(31 * 24 * time.Hour))
	if again, created, err := st.AcquireLease(g.ID, "clone-a"); err != nil || created || again != l {
		t.Errorf("retry on an ineligible generation = %+v, %v, %v; want the existing lease", again, created, err)
	}
	if _, _, err := st.AcquireLease(g.ID, "clone-b"); !errors.Is(err, store.ErrIneligible) {
		t.Errorf("new lease on an ineligible generation: got %v, want ErrIneligible", err)
	}
	host.mu.Lock()
	host.err = errors.New("no /etc/machine-id")
	host.mu.Unlock()
	if again, _, err := st.AcquireLease(g.ID, "clone-a"); err != nil || again != l {
		t.Errorf("retry with unreadable host facts = %+v, %v; want the existing lease", again, err)
	}
	if _, _, err := st.AcquireLease(g.ID, "clone-c"); err == nil || !strings.Contains(err.Error(), "no /etc/machine-id") {
		t.Errorf("new lease with unreadable host facts: got %v, want the read error", err)
	}
}

func TestPublishRecordsAnchors(t *testing.T) {
	dir, st, host := openStore(t)
	v6 := publish(t, st, makeCaptureVersion(t, 6, 1))
	v5 := publishVersion(t, st, 5, 2)
	st.Close()
	st = reopen(t, dir, host)
	want := map[store.GenerationID]store.TimeAnchors{
		v6.ID: {Source: store.AnchorTimeContract, UTC: captureUTC, MonotonicNs: captureMono, HostClock: "linux-boottime", HostID: hostA, BootID: bootA},
		v5.ID: {Source: store.AnchorCaptureWallClock, UTC: captureUTC},
	}
	for id, w := range want {
		g, err := st.Generation(id)
		if err != nil {
			t.Fatal(err)
		}
		if !g.Anchors.UTC.Equal(w.UTC) {
			t.Errorf("%s: anchor UTC %v, want %v", id, g.Anchors.UTC, w.UTC)
		}
		g.Anchors.UTC = w.UTC
		if g.Anchors != w {
			t.Errorf("%s: anchors %+v, want %+v", id, g.Anchors, w)
		}
	}
}
