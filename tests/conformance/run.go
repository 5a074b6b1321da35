//go:build linux

// Package conformance is the mount-level test suite every templatefs
// backend passes: go-fuse (package fs) and cgofuse (package winfsp, on
// Linux over libfuse3 with -tags fuse3). A backend's test calls Run with
// its MountFunc; each case mounts a fresh store, acts through the kernel
// with real syscalls and tools (ls, mv, rmdir, touch, sh), and checks the
// results against the store. Cases skip when FUSE is unavailable, unless
// TEMPLATEFS_REQUIRE_FUSE=1, which makes them fail. Case Behaviour runs
// the behaviour table (behaviour.go), which TestBehaviourInProcess also
// runs against leasefs without a mount.
package conformance

import "testing"

// cases are the suite, by name.
var cases = []struct {
	name string
	run  func(*testing.T, Backend)
}{
	{"Behaviour", testBehaviour},
	{"MountTree", testMountTree},
	{"Payload", testPayload},
	{"NoXattrs", testNoXattrs},
	{"Sums", testSums},
	{"AttrCache", testAttrCache},
	{"Leases", testLeases},
	{"Tombstone", testTombstone},
	{"InoStableAcrossRemount", testInoStableAcrossRemount},
	{"Parallel", testParallel},
	{"LeaseBindAndKill", testLeaseBindAndKill},
	{"Ctl", testCtl},
	{"CommandLines", testCommandLines},
	{"Errnos", testErrnos},
	{"TextAttrs", testTextAttrs},
	{"Retire", testRetire},
	{"Lift", testLift},
	{"KeyLeases", testKeyLeases},
	{"OtherUser", testOtherUser},
	{"ExitTracking", testExitTracking},
	{"Incoming", testIncoming},
	{"IncomingPublishRace", testIncomingPublishRace},
	{"IncomingOtherUser", testIncomingOtherUser},
	{"Events", testEvents},
	{"LaunchBind", testLaunchBind},
	{"ReservedLeaseStays", testReservedLeaseStays},
	{"Listing", testListing},
}

// Run runs every case against b, each as a subtest with its own store
// and mount.
func Run(t *testing.T, b Backend) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}
