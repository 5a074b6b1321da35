//go:build linux

package conformance

import "testing"

// TestBehaviourInProcess runs the behaviour table against leasefs itself,
// without a mount: the third way, beside case Behaviour on go-fuse and
// cgofuse.
func TestBehaviourInProcess(t *testing.T) {
	runBehaviours(t, newInProcess)
}
