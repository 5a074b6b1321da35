//go:build windows

package winfsp

import "templatefs/leasefs"

// callerOf returns the store owner. WinFsp reports a uid mapped from the
// caller's Windows SID (FspPosixMapSidToUid), which never equals the
// store's owner uid (os.Geteuid is -1 on Windows), so the uid check of
// leasefs cannot work there. A drive letter mounted by a user exists in
// that user's logon session only, so the callers that reach the mount
// are that user's processes; docs/windows.md says so.
func (f *fileSystem) callerOf() leasefs.Caller { return f.owner }
