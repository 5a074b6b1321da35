//go:build windows

package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/windows"
)

// openCaptureDir opens dir itself, never a reparse point's target
// (FILE_FLAG_OPEN_REPARSE_POINT; FILE_FLAG_BACKUP_SEMANTICS to open a
// directory at all). A reparse point (symbolic link, junction, mount
// point) or anything but a directory is ErrNotRegular (§1: "reparse points
// rejected on Windows").
func openCaptureDir(dir string) (*os.File, error) {
	name, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return nil, fmt.Errorf("capture %q: open directory: %w", dir, err)
	}
	h, err := windows.CreateFile(name, windows.GENERIC_READ,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return nil, fmt.Errorf("capture %q: open directory: %w", dir, err)
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("capture %q: stat directory: %w", dir, err)
	}
	switch attrs := info.FileAttributes; {
	case attrs&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		windows.CloseHandle(h)
		return nil, fmt.Errorf("capture %q: a reparse point (symbolic link, junction or mount point): %w", dir, ErrNotRegular)
	case attrs&windows.FILE_ATTRIBUTE_DIRECTORY == 0:
		windows.CloseHandle(h)
		return nil, fmt.Errorf("capture %q: not a directory: %w", dir, ErrNotRegular)
	}
	return os.NewFile(uintptr(h), dir), nil
}

// openArtifact opens name relative to the directory handle d
// (NtCreateFile with RootDirectory, as OpenVMM opens artifacts relative to
// the snapshot directory) and requires a regular file that is no reparse
// point. FILE_OPEN_REPARSE_POINT opens a reparse point itself, which is
// then refused; FILE_NON_DIRECTORY_FILE refuses a directory. The share
// mode lets others read, rename or delete the file while it is open (as
// on Unix, the handle keeps reading what was opened) but not write it, so
// the copy Publish makes cannot change under it.
func openArtifact(d *os.File, dir, name string) (CaptureFile, error) {
	uname, err := windows.NewNTUnicodeString(name)
	if err != nil {
		return CaptureFile{}, fmt.Errorf("capture %q: open %s: %w", dir, name, err)
	}
	oa := windows.OBJECT_ATTRIBUTES{
		RootDirectory: windows.Handle(d.Fd()),
		ObjectName:    uname,
		Attributes:    windows.OBJ_CASE_INSENSITIVE,
	}
	oa.Length = uint32(unsafe.Sizeof(oa))
	var h windows.Handle
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtCreateFile(&h, windows.GENERIC_READ|windows.SYNCHRONIZE, &oa, &iosb, nil, 0,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_DELETE, windows.FILE_OPEN,
		windows.FILE_NON_DIRECTORY_FILE|windows.FILE_SYNCHRONOUS_IO_NONALERT|windows.FILE_OPEN_REPARSE_POINT, 0, 0)
	var status windows.NTStatus
	switch {
	case errors.Is(err, windows.STATUS_OBJECT_NAME_NOT_FOUND):
		return CaptureFile{}, fmt.Errorf("capture %q: %s is missing: %w", dir, name, ErrIncompleteCapture)
	case errors.Is(err, windows.STATUS_FILE_IS_A_DIRECTORY):
		return CaptureFile{}, fmt.Errorf("capture %q: %s is a directory: %w", dir, name, ErrNotRegular)
	case errors.As(err, &status):
		return CaptureFile{}, fmt.Errorf("capture %q: open %s: %w", dir, name, status.Errno())
	case err != nil:
		return CaptureFile{}, fmt.Errorf("capture %q: open %s: %w", dir, name, err)
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return CaptureFile{}, fmt.Errorf("capture %q: stat %s: %w", dir, name, err)
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 {
		windows.CloseHandle(h)
		return CaptureFile{}, fmt.Errorf("capture %q: %s is a reparse point (symbolic link, junction or mount point): %w", dir, name, ErrNotRegular)
	}
	if t, err := windows.GetFileType(h); err != nil || t != windows.FILE_TYPE_DISK {
		windows.CloseHandle(h)
		return CaptureFile{}, fmt.Errorf("capture %q: %s is not a regular file (file type %d, %v): %w", dir, name, t, err, ErrNotRegular)
	}
	size := int64(info.FileSizeHigh)<<32 | int64(info.FileSizeLow)
	return CaptureFile{Name: name, Size: size, File: os.NewFile(uintptr(h), filepath.Join(dir, name))}, nil
}
