//go:build windows

package store

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// syncDir does nothing on Windows, where a directory handle cannot be
// flushed (FlushFileBuffers is documented for files and volumes only) and
// OpenVMM's publication skips the parent fsync too
// (openvmm-snapshot-format.md §6 step 7). What a store call promises is
// still durable: every file is flushed with FlushFileBuffers
// (os.File.Sync), and renameNoReplace returns only once the rename is on
// disk (MOVEFILE_WRITE_THROUGH); NTFS commits metadata changes through
// its log in order, so the creates before that rename are on disk too.
// The other callers remove leftovers, which Open and Check remove again
// if a crash undoes the removal.
func syncDir(string) error { return nil }

// renameNoReplace renames directory from to to with MoveFileEx and
// MOVEFILE_WRITE_THROUGH. Without MOVEFILE_REPLACE_EXISTING it fails
// (ERROR_ALREADY_EXISTS) if to exists. Windows also refuses to rename a
// directory while a file in it is open: Publish closes every staged file
// first.
func renameNoReplace(from, to string) error {
	f, err := windows.UTF16PtrFromString(from)
	if err != nil {
		return err
	}
	t, err := windows.UTF16PtrFromString(to)
	if err != nil {
		return err
	}
	return windows.MoveFileEx(f, t, windows.MOVEFILE_WRITE_THROUGH)
}

// openNoFollow opens path read-only. FILE_FLAG_OPEN_REPARSE_POINT opens a
// reparse point (symbolic link, junction, mount point) itself rather than
// its target, and it is then refused with ErrUnsafePath. The share mode
// lets others read the file and delete or rename it (retirement removes
// payload files a reader may still hold), but not write it.
func openNoFollow(path string) (*os.File, error) {
	name, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := windows.CreateFile(name, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 {
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("a reparse point: %w", ErrUnsafePath)}
	}
	return os.NewFile(uintptr(h), path), nil
}

// lockOwnerOffset is where the Windows lock file holds the owner's pid.
// gofrs/flock locks byte 0 with LockFileEx, and Windows byte-range locks
// are mandatory: while the lock is held no other handle, in this process
// or another, may read or write that byte.
const lockOwnerOffset = 1

// writeLockOwner records pid as text at lockOwnerOffset, padded to a fixed
// width so that it overwrites a longer pid an earlier owner wrote.
func writeLockOwner(path string, pid int) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(fmt.Appendf(nil, "%-20d\n", pid), lockOwnerOffset)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readLockOwner returns the pid text the lock file at path holds, or ""
// if it cannot be read.
func readLockOwner(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, lockOwnerOffset)
	return strings.TrimSpace(string(b[:n]))
}

// killedExitCode is the exit code of a process the store terminates,
// itself at a fail point (killSelf) or a bound clone (Processes.Kill):
// 137 is what a shell reports for a process killed by SIGKILL, the Linux
// counterpart.
const killedExitCode = 137

// killSelf terminates this process at once.
func killSelf() { windows.TerminateProcess(windows.CurrentProcess(), killedExitCode) }

// fileBasicInfo is FILE_BASIC_INFO: times in 100 ns units since 1601.
type fileBasicInfo struct {
	CreationTime, LastAccessTime, LastWriteTime, ChangeTime int64
	FileAttributes                                          uint32
	_                                                       uint32
}

// stampOf returns f's size, last write time (as mtime) and change time
// (as ctime, from FILE_BASIC_INFO), the NTFS counterparts of fstat's.
func stampOf(f *os.File) (fileStamp, error) {
	var bi fileBasicInfo
	if err := windows.GetFileInformationByHandleEx(windows.Handle(f.Fd()), windows.FileBasicInfo,
		(*byte)(unsafe.Pointer(&bi)), uint32(unsafe.Sizeof(bi))); err != nil {
		return fileStamp{}, &fs.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		return fileStamp{}, err
	}
	ft := func(t int64) time.Time {
		w := windows.Filetime{LowDateTime: uint32(t), HighDateTime: uint32(t >> 32)}
		return time.Unix(0, w.Nanoseconds())
	}
	return fileStamp{Size: fi.Size(), Mtime: ft(bi.LastWriteTime), Ctime: ft(bi.ChangeTime)}, nil
}

// openBeneath opens rel, a slash-separated path below the directory dir,
// read-only with openNoFollow: a reparse point as the last component is
// refused. Windows has no openat2; the directories on the way were checked
// to be no reparse points by Open (checkTree), which is the behaviour
// Windows had before openBeneath.
func openBeneath(dir *os.File, rel string) (*os.File, error) {
	return openNoFollow(filepath.Join(dir.Name(), filepath.FromSlash(rel)))
}

// openDir opens the store directory itself (os.Open opens directories
// with FILE_FLAG_BACKUP_SEMANTICS); checkTree has refused a reparse point.
func openDir(path string) (*os.File, error) { return os.Open(path) }

// linkCount returns the number of hard links of f (NumberOfLinks of
// GetFileInformationByHandle).
func linkCount(f *os.File) (uint64, error) {
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &info); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	return uint64(info.NumberOfLinks), nil
}
