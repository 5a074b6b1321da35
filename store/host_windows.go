//go:build windows

package store

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"

	"templatefs/internal/hostclock"
)

// Where Windows keeps the host identity (openvmm-snapshot-format.md §3.1),
// under HKEY_LOCAL_MACHINE.
const (
	machineGUIDKey   = `SOFTWARE\Microsoft\Cryptography`
	machineGUIDValue = "MachineGuid"
	bootIDKey        = `SYSTEM\CurrentControlSet\Control\Session Manager\Memory Management\PrefetchParameters`
	bootIDValue      = "BootId"
)

// queryInterruptTimePrecise is QueryInterruptTimePrecise (Windows 10 and
// later), found through the API set that documents it.
var queryInterruptTimePrecise = windows.NewLazySystemDLL("api-ms-win-core-realtime-l1-1-1.dll").NewProc("QueryInterruptTimePrecise")

// ReadHostFacts reads this host's facts (§3.1): HostID from MachineGuid,
// BootID from PrefetchParameters\BootId, and the "windows-interrupt-time"
// clock, the midpoint of two QueryInterruptTimePrecise reads around the
// UTC read, as OpenVMM's capture anchor takes it. Errors name the registry
// value that could not be read or parsed, or the missing clock function.
func ReadHostFacts() (HostFacts, error) {
	f := HostFacts{HostClock: "windows-interrupt-time"}
	var err error
	if f.HostID, err = readMachineGUID(); err != nil {
		return f, err
	}
	if f.BootID, err = readPrefetchBootID(); err != nil {
		return f, err
	}
	if err := queryInterruptTimePrecise.Find(); err != nil {
		return f, fmt.Errorf("interrupt time: %w", err)
	}
	a := interruptTime()
	f.UTC = hostclock.Now().UTC()
	b := interruptTime()
	f.MonotonicNs = (a + b) * 100 / 2
	return f, nil
}

// interruptTime returns QueryInterruptTimePrecise: 100 ns units since
// boot, sleep and hibernation included. The function returns nothing.
func interruptTime() uint64 {
	var t uint64
	queryInterruptTimePrecise.Call(uintptr(unsafe.Pointer(&t)))
	return t
}

// readMachineGUID reads MachineGuid from the 64-bit registry view, which a
// 32-bit build would otherwise be redirected from.
func readMachineGUID() ([16]byte, error) {
	src := `HKLM\` + machineGUIDKey + `\` + machineGUIDValue
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, machineGUIDKey, registry.QUERY_VALUE|registry.WOW64_64KEY)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%s: %w", src, err)
	}
	defer k.Close()
	s, _, err := k.GetStringValue(machineGUIDValue)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%s: %w", src, err)
	}
	return parseMachineGUID(src, s)
}

// readPrefetchBootID reads the BootId DWORD, which Windows increments on
// every boot, as the 16-byte boot ID of §3.1.
func readPrefetchBootID() ([16]byte, error) {
	src := `HKLM\` + bootIDKey + `\` + bootIDValue
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, bootIDKey, registry.QUERY_VALUE)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%s: %w", src, err)
	}
	defer k.Close()
	v, typ, err := k.GetIntegerValue(bootIDValue)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%s: %w", src, err)
	}
	if typ != registry.DWORD {
		return [16]byte{}, fmt.Errorf("%s has registry type %d, want REG_DWORD (%d)", src, typ, registry.DWORD)
	}
	return bootIDFromDWORD(uint32(v)), nil
}
