//go:build windows

package winfsp

import (
	"fmt"
	"path/filepath"
	"runtime"
	"unsafe"

	"github.com/winfsp/cgofuse/fuse"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"

	"templatefs/leasefs"
)

// callerOf returns the caller of the request being served, as WinFsp
// reports it (fuse_get_context): the uid it maps the caller's SID to
// (FspPosixMapSidToUid), or -1 when it has none, which owns nothing, and
// its process ID.
// Call it only from a callback.
func (f *fileSystem) callerOf() leasefs.Caller {
	uid, _, pid := fuse.Getcontext()
	return leasefs.Caller{UID: uid, PID: pid}
}

// platformOwners returns who may change the tree in WinFsp's uid space:
// WinFsp's own mapping (FspPosixMapSidToUid, from the WinFsp DLL) of the
// daemon's user, the store owner, and of LocalSystem, Windows' root. The
// store's POSIX owner uid means nothing here (os.Geteuid is -1 on
// Windows). Errors: ErrNoFUSE without WinFsp, or a SID WinFsp cannot map.
func platformOwners() ([]uint32, error) {
	mapSid, err := winfspProc("FspPosixMapSidToUid")
	if err != nil {
		return nil, err
	}
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("winfsp: the daemon's user: %w", err)
	}
	system, err := windows.CreateWellKnownSid(windows.WinLocalSystemSid)
	if err != nil {
		return nil, fmt.Errorf("winfsp: the LocalSystem SID: %w", err)
	}
	var owners []uint32
	for _, sid := range []*windows.SID{user.User.Sid, system} {
		var uid uint32
		if status, _, _ := mapSid.Call(uintptr(unsafe.Pointer(sid)), uintptr(unsafe.Pointer(&uid))); status != 0 {
			return nil, fmt.Errorf("winfsp: map SID %s to a uid: NTSTATUS %#x", sid, status)
		}
		owners = append(owners, uid)
	}
	return owners, nil
}

// winfspProc finds proc in the WinFsp DLL, which the installer records
// under HKLM\Software\WinFsp\InstallDir (as cgofuse finds it).
func winfspProc(proc string) (*windows.Proc, error) {
	name := map[string]string{"amd64": "winfsp-x64.dll", "arm64": "winfsp-a64.dll", "386": "winfsp-x86.dll"}[runtime.GOARCH]
	dll, err := windows.LoadDLL(name)
	if err != nil {
		k, kerr := registry.OpenKey(registry.LOCAL_MACHINE, `Software\WinFsp`, registry.QUERY_VALUE|registry.WOW64_32KEY)
		if kerr != nil {
			return nil, fmt.Errorf("winfsp: %s: %v: %w", name, kerr, ErrNoFUSE)
		}
		dir, _, kerr := k.GetStringValue("InstallDir")
		k.Close()
		if kerr != nil {
			return nil, fmt.Errorf("winfsp: %s: InstallDir: %v: %w", name, kerr, ErrNoFUSE)
		}
		if dll, err = windows.LoadDLL(filepath.Join(dir, "bin", name)); err != nil {
			return nil, fmt.Errorf("winfsp: %v: %w", err, ErrNoFUSE)
		}
	}
	return dll.FindProc(proc)
}
