package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTextGolden(t *testing.T) {
	m := Sample(sampleOptions(6))
	m.Contract.Attachments = []Attachment{{StableID: "console:microvm-virtio0", Kind: "virtio-console", Identity: []byte("console")}}
	got := m.Text()
	if got != m.Text() {
		t.Fatal("Text is not deterministic")
	}
	path := filepath.Join("testdata", "sample_v6.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Text differs from %s (run go test -update to accept):\n%s", path, got)
	}
}

func TestTextValues(t *testing.T) {
	v5 := Sample(sampleOptions(5))
	v5.Contract.Network = &MicrovmNetwork{
		Profile: "portable", GuestIPv4: 0x0A000002, PrefixLength: 24, GatewayIPv4: 0x0A000001,
		GuestMAC: []byte{0x02, 0, 0, 0, 0, 0x01}, GatewayMAC: []byte{1, 2, 3},
	}
	v5.Contract.Devices[0].StableID = "line\nbreak"
	v5.CreatedAt.Nanos = -1
	text := v5.Text()
	for _, want := range []string{
		"version: 5\n",
		"created_at: seconds 1735787045 nanos -1 (invalid)\n",
		"machine_contract.capture_wall_clock: 2025-01-02T03:04:05.123456789Z\n",
		"machine_contract.microvm_network.guest_ipv4: 10.0.0.2\n",
		"machine_contract.microvm_network.gateway_ipv4: 10.0.0.1\n",
		"machine_contract.microvm_network.guest_mac: 02:00:00:00:00:01\n",
		"machine_contract.microvm_network.gateway_mac: 010203\n",
		"machine_contract.microvm_network.egress_policy_sha256: \"\"\n",
		`machine_contract.devices[0].stable_id: "line\nbreak"` + "\n",
		"machine_contract.devices[6].irq: 0\n",
		"machine_contract.devices[5].irq: none\n",
		"machine_contract.apic_frequency_hz: 1000000000\n",
		"machine_contract.cpu_contract: 24 bytes, sha256 ",
		"machine_contract.microvm_filesystem: none\n",
		"machine_contract.attachments: []\n",
		"state_sha256: \"\"\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("v5 text lacks %q", want)
		}
	}
	for _, absent := range []string{"machine_contract.time", "cpu_profile", "microvm_image_slot_capacity"} {
		if strings.Contains(text, absent) {
			t.Errorf("v5 text shows version 6 field %q", absent)
		}
	}
	v6 := Sample(sampleOptions(6)).Text()
	for _, absent := range []string{"state_sha256", "capture_wall_clock", "machine_contract.tsc_frequency_hz", "clock_policy", "machine_contract.apic_frequency_hz"} {
		if strings.Contains(v6, absent) {
			t.Errorf("v6 text shows retired field %q", absent)
		}
	}
	if got := standardManifest(5).Text(); !strings.Contains(got, "machine_contract: none\n") {
		t.Errorf("standard manifest text lacks machine_contract: none:\n%s", got)
	}
}
