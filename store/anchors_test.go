package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"templatefs/store"
	"templatefs/store/manifest"
	"templatefs/store/templatekey"
)

// facts is the capture's host, boot and clock kind, monoAge after the
// capture by its monotonic clock and wallAge by the wall clock.
func facts(monoAge, wallAge time.Duration) store.HostFacts {
	return store.HostFacts{HostID: hostA, BootID: bootA, HostClock: "linux-boottime",
		MonotonicNs: uint64(int64(captureMono) + int64(monoAge)), UTC: captureUTC.Add(wallAge)}
}

// TestAnchorAgreement: for a capture of this boot, the age by the wall
// clock and the age by the monotonic clock must agree within the restore
// window, else no lease, neither by generation nor by key. Captures of
// another boot, host or clock kind are aged by UTC alone.
func TestAnchorAgreement(t *testing.T) {
	const day = 24 * time.Hour
	_, st, host := openStore(t)
	if err := st.SetSettings(store.Settings{RestoreWindow: day}); err != nil {
		t.Fatal(err)
	}
	g := publish(t, st, makeCapture(t, 16<<20, 1))
	otherBoot := func(f store.HostFacts) store.HostFacts { f.BootID = bootB; return f }
	otherKind := func(f store.HostFacts) store.HostFacts { f.HostClock = "windows-interrupt-time"; return f }
	for i, tc := range []struct {
		name   string
		facts  store.HostFacts
		ok     bool
		reason string
	}{
		{"agree", facts(time.Hour, time.Hour), true, "eligible"},
		{"wall clock a window ahead", facts(time.Hour, time.Hour+day), true, "eligible"},
		{"wall clock a window and 1ns ahead", facts(time.Hour, time.Hour+day+1), false,
			"ineligible: the capture's wall-clock and monotonic anchors disagree by 24h, more than the 24h restore window"},
		{"wall clock a window and 1ns behind", facts(time.Hour, time.Hour-day-1), false, "anchors disagree by 24h"},
		{"wall clock a century ahead", facts(time.Hour, 100*365*day), false, "anchors disagree by 875999h"},
		{"other boot: UTC alone", otherBoot(facts(time.Hour, time.Hour)), true, "eligible"},
		{"other boot, a century later", otherBoot(facts(time.Hour, 100*365*day)), false, "restore window of 24h passed"},
		{"other clock kind: UTC alone", otherKind(facts(time.Hour, 2*time.Hour)), true, "eligible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host.set(tc.facts)
			e, err := st.Eligibility(g.ID)
			if err != nil || e.Eligible != tc.ok || !strings.Contains(e.Reason, tc.reason) {
				t.Fatalf("Eligibility = %+v, %v; want eligible %t, reason %q", e, err, tc.ok, tc.reason)
			}
			byGen, _, genErr := st.AcquireLease(g.ID, "gen-"+string(rune('a'+i)))
			byKey, _, keyErr := st.AcquireLeaseByKey(g.KeyID, "key-"+string(rune('a'+i)))
			if tc.ok {
				if genErr != nil || keyErr != nil || byGen.Generation != g.ID || byKey.Generation != g.ID {
					t.Errorf("leases = %v, %v; want both on %s", genErr, keyErr, g.ID)
				}
				return
			}
			detail := strings.TrimPrefix(tc.reason, "ineligible: ")
			for _, err := range []error{genErr, keyErr} {
				if !errors.Is(err, store.ErrIneligible) || !strings.Contains(err.Error(), detail) {
					t.Errorf("lease: got %v, want ErrIneligible saying %q", err, detail)
				}
			}
		})
	}
}

// TestPublishRefusesImpossibleCaptures: publication applies the manifest
// rules that need this host (a capture from more than a day in the host's
// future, anchors of this boot that disagree), and the class check; a
// refusal leaves no generation and burns no ID.
func TestPublishRefusesImpossibleCaptures(t *testing.T) {
	const day = 24 * time.Hour
	_, st, host := openStore(t)
	if err := st.SetSettings(store.Settings{RestoreWindow: day}); err != nil {
		t.Fatal(err)
	}
	v6 := templatekey.SampleClass()
	v5 := templatekey.SampleClass()
	v5.Contracts.Snapshot = 5
	for _, tc := range []struct {
		name    string
		facts   store.HostFacts
		capture func(t *testing.T) string
		class   templatekey.Class
		want    error
		mention string
	}{
		{"capture a day and 1s in the host's future", afterReboot(-day - time.Second), func(t *testing.T) string { return makeCapture(t, 16<<20, 1) }, v6,
			manifest.ErrInvalid, "manifest.created_at " + captureUTC.Format(time.RFC3339Nano) + " is more than 24h0m0s ahead of the host's clock"},
		{"anchors of this boot a window and 1ns apart", facts(time.Hour, time.Hour+day+1), func(t *testing.T) string { return makeCapture(t, 16<<20, 1) }, v6,
			store.ErrCapture, "time.capture_utc_ns " + captureUTC.Format(time.RFC3339Nano) + " and time.capture_monotonic_ns 123000000000 disagree"},
		{"snapshot contract 6 on a v5 capture", sameBoot(time.Hour), func(t *testing.T) string { return makeCaptureVersion(t, 5, 1) }, v6,
			templatekey.ErrClassMismatch, "class contracts.snapshot is 6 but manifest.version is 5"},
		{"hypervisor whp on a kvm capture", sameBoot(time.Hour), func(t *testing.T) string { return makeCapture(t, 16<<20, 1) },
			func() templatekey.Class { c := v6; c.Isolation.Hypervisor = "whp"; return c }(),
			templatekey.ErrClassMismatch, `class isolation.hypervisor is "whp" but manifest.machine_contract.source_hypervisor is "kvm"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host.set(tc.facts)
			capture := tc.capture(t)
			if _, err := st.Publish(capture, &tc.class); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("Publish = %v, want %v mentioning %q", err, tc.want, tc.mention)
			}
			if gens, err := st.Generations(); err != nil || len(gens) != 0 {
				t.Errorf("after a refused publication: %d generations, %v", len(gens), err)
			}
		})
	}
	host.set(sameBoot(time.Hour))
	if g := publish(t, st, makeCapture(t, 16<<20, 1)); g.ID != 1 {
		t.Errorf("first accepted publication got %s, want g000001: a refusal burned an ID", g.ID)
	}
	if entries, err := os.ReadDir(filepath.Join(st.Dir(), store.StagingDir)); err != nil || len(entries) != 0 {
		t.Errorf("staging holds %d entries (%v) after refusals", len(entries), err)
	}
}
