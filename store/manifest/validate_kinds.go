package manifest

import (
	"fmt"
	"slices"
)

// Architectures a manifest may name (openvmm-snapshot-format.md §2.2 field 7).
const (
	ArchX86_64  = "x86_64"
	ArchAArch64 = "aarch64"
)

// hypervisorArchitectures lists the architectures each source hypervisor
// captures (§2.3 field 3: aarch64 builds accept kvm only; MSHV and WHP are
// x86_64 backends).
var hypervisorArchitectures = map[string][]string{
	"kvm":  {ArchX86_64, ArchAArch64},
	"mshv": {ArchX86_64},
	"whp":  {ArchX86_64},
}

// deviceKinds maps every device kind OpenVMM's microVM builder writes to the
// architecture it is tied to, "" for both. The fixed x86_64 list is §2.3's;
// the aarch64 variant (snapshot.rs @ 96fcafb9) replaces pic, ioapic,
// lapic, pit, rtc and portb with two pl011 UARTs and a control-console; the
// virtio kinds are those of the optional devices of §2.3 and the v6 image
// slots (§2.6).
var deviceKinds = map[string]string{
	"partition":              "",
	"vcpu":                   "",
	"clock":                  "",
	"shutdown":               "",
	"snapshot-request":       "",
	"virtio-net":             "",
	"virtio-fs":              "",
	"virtio-console":         "",
	"virtio-control-console": "",
	"virtio-blk":             "",
	"virtio-blk-image-slot":  "",
	"pic":                    ArchX86_64,
	"ioapic":                 ArchX86_64,
	"lapic":                  ArchX86_64,
	"pit":                    ArchX86_64,
	"rtc":                    ArchX86_64,
	"portb":                  ArchX86_64,
	"pl011":                  ArchAArch64,
	"control-console":        ArchAArch64,
}

// attachmentKinds are the host attachments a microVM contract records: the
// network, filesystem, console and control-console endpoints (§2.3, §5.3).
var attachmentKinds = []string{"virtio-net", "virtio-fs", "virtio-console", "virtio-control-console"}

// validateArchitecture requires architecture to be x86_64 or aarch64.
func validateArchitecture(arch string) error {
	if arch != ArchX86_64 && arch != ArchAArch64 {
		return invalidf("manifest.architecture %q is not %q or %q", arch, ArchX86_64, ArchAArch64)
	}
	return nil
}

// validateKinds checks the contract against the manifest's architecture:
// the (known) source hypervisor captures that architecture, every device kind and
// attachment kind is one of the lists above, no device is tied to the other
// architecture, and only x86_64 devices use port I/O (pmio).
func validateKinds(c *MachineContract, arch string) error {
	if !slices.Contains(hypervisorArchitectures[c.SourceHypervisor], arch) {
		return invalidf("%s.source_hypervisor %q does not capture manifest.architecture %q", contractPath, c.SourceHypervisor, arch)
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		name := fmt.Sprintf("%s.devices[%d]", contractPath, i)
		tied, ok := deviceKinds[d.Kind]
		switch {
		case !ok:
			return invalidf("%s.kind %q is not a device kind of the format", name, d.Kind)
		case tied != "" && tied != arch:
			return invalidf("%s.kind %q exists only on %s, not on manifest.architecture %q", name, d.Kind, tied, arch)
		}
		if arch != ArchX86_64 {
			for j, r := range d.Ranges {
				if r.AddressSpace == "pmio" {
					return invalidf("%s.ranges[%d] is port I/O (pmio), which manifest.architecture %q does not have", name, j, arch)
				}
			}
		}
	}
	for i := range c.Attachments {
		if k := c.Attachments[i].Kind; !slices.Contains(attachmentKinds, k) {
			return invalidf("%s.attachments[%d].kind %q is not one of %q", contractPath, i, k, attachmentKinds)
		}
	}
	return nil
}
