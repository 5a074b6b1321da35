package templatekey

import (
	"fmt"
	"strconv"
	"strings"
)

// ClassFromText recovers the class from a key's canonical text (Key.Text,
// as a store records it): the class.* lines New writes first, all of the
// class and nothing else, so New(ClassFromText(k.Text()), m) gives k again
// for the manifest k was made from. It returns ErrClassInvalid for text
// whose class lines are missing, out of order, malformed or unknown, and
// the class's Validate error.
func ClassFromText(text string) (*Class, error) {
	var c Class
	fields := []struct {
		name string
		str  *string
		num  *uint32
	}{
		{name: "class.key_encoding_version", num: &c.KeyEncodingVersion},
		{name: "class.bundle.vmm", str: &c.Bundle.VMM},
		{name: "class.bundle.kernel", str: &c.Bundle.Kernel},
		{name: "class.bundle.initramfs", str: &c.Bundle.Initramfs},
		{name: "class.bundle.guest_build", str: &c.Bundle.GuestBuild},
		{name: "class.contracts.boot", num: &c.Contracts.Boot},
		{name: "class.contracts.snapshot", num: &c.Contracts.Snapshot},
		{name: "class.contracts.device_state", num: &c.Contracts.DeviceState},
		{name: "class.contracts.time", num: &c.Contracts.Time},
		{name: "class.contracts.restore_packet", num: &c.Contracts.RestorePacket},
		{name: "class.contracts.control", num: &c.Contracts.Control},
		{name: "class.contracts.activation", num: &c.Contracts.Activation},
		{name: "class.network_policy", str: &c.NetworkPolicy},
		{name: "class.isolation.hypervisor", str: &c.Isolation.Hypervisor},
		{name: "class.isolation.sandbox", str: &c.Isolation.Sandbox},
		{name: "class.isolation.vp_count_limit", num: &c.Isolation.VPCountLimit},
	}
	lines := strings.SplitN(text, "\n", len(fields)+1)
	if len(lines) <= len(fields) {
		return nil, fmt.Errorf("%w: key text has %d lines, fewer than the class's %d", ErrClassInvalid, len(lines)-1, len(fields))
	}
	for i, f := range fields {
		name, value, ok := strings.Cut(lines[i], "=")
		if !ok || name != f.name {
			return nil, fmt.Errorf("%w: key text line %d is %q, want %s=…", ErrClassInvalid, i+1, lines[i], f.name)
		}
		var err error
		if f.str != nil {
			*f.str, err = strconv.Unquote(value)
		} else {
			var n uint64
			n, err = strconv.ParseUint(value, 10, 32)
			*f.num = uint32(n)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: key text line %d (%s): %q: %w", ErrClassInvalid, i+1, f.name, value, err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
