package templatekey

import (
	"fmt"

	"templatefs/store/manifest"
)

// checkMatch refuses a class that contradicts its capture's manifest where
// both record the same fact: contracts.snapshot is the manifest version
// (§0); isolation.hypervisor is the machine contract's source_hypervisor
// (§2.3 field 3); contracts.time is the time contract's time_abi_version
// (§3.1 field 1). A standard machine records no hypervisor and a v5
// manifest no time ABI, so those pairs are checked only when the manifest
// has them. The error is ErrClassMismatch naming both fields and values.
func checkMatch(c *Class, m *manifest.Manifest) error {
	mismatch := func(classField string, classValue any, manifestField string, manifestValue any) error {
		return fmt.Errorf("%w: class %s is %v but %s is %v", ErrClassMismatch, classField, classValue, manifestField, manifestValue)
	}
	if c.Contracts.Snapshot != m.Version {
		return mismatch("contracts.snapshot", c.Contracts.Snapshot, "manifest.version", m.Version)
	}
	mc := m.Contract
	if mc == nil {
		return nil
	}
	if c.Isolation.Hypervisor != mc.SourceHypervisor {
		return mismatch("isolation.hypervisor", fmt.Sprintf("%q", c.Isolation.Hypervisor),
			"manifest.machine_contract.source_hypervisor", fmt.Sprintf("%q", mc.SourceHypervisor))
	}
	if mc.Time != nil && c.Contracts.Time != mc.Time.TimeABIVersion {
		return mismatch("contracts.time", c.Contracts.Time, "manifest.machine_contract.time.time_abi_version", mc.Time.TimeABIVersion)
	}
	return nil
}
