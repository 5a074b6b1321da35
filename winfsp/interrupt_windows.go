//go:build windows

package winfsp

// interrupted is false on Windows: WinFsp's FUSE layer tells a callback
// of no cancelled request, so a read of the events file there ends only
// with the events (at unmount) or with data.
func interrupted() bool { return false }
