//go:build windows

package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/windows"
)

// privateDirSDDL is the security descriptor mkdirPrivate gives a new
// store directory, OpenVMM's staging DACL (openvmm-snapshot-format.md §6):
// protected from the parent's inheritable ACEs, full access for SYSTEM and
// the current user (%s, its SID), inherited by every file (OI) and
// directory (CI) created below.
const privateDirSDDL = "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;%s)"

// mkdirPrivate creates directory dir with privateDirSDDL, the Windows
// counterpart of mode 0700.
func mkdirPrivate(dir string) error {
	p, err := currentPrincipals()
	if err != nil {
		return err
	}
	sd, err := windows.SecurityDescriptorFromString(fmt.Sprintf(privateDirSDDL, p.user))
	if err != nil {
		return fmt.Errorf("mkdir %s: security descriptor: %w", dir, err)
	}
	name, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	sa := windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(sa))
	if err := windows.CreateDirectory(name, &sa); err != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return nil
}

// checkPrivate refuses path unless it is no reparse point (symbolic link,
// junction, mount point or any other), its owner is the current user
// (currentPrincipals) and its DACL grants write access to nobody else
// (checkDACL, trustedWriters).
func checkPrivate(path string) error {
	p, err := currentPrincipals()
	if err != nil {
		return err
	}
	return checkObject(path, p)
}

// checkTree applies checkPrivate to dir and everything below it.
// checkObject refuses a reparse point before WalkDir could enter it, so
// the walk never leaves the store.
func checkTree(dir string) error {
	p, err := currentPrincipals()
	if err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return checkObject(path, p)
	})
}

// principals are the SIDs of this process's token that may own store
// objects: the user, and the token's default owner for new objects, which
// is BUILTIN\Administrators in an elevated administrator's token and the
// user otherwise.
type principals struct {
	user, owner *windows.SID
}

func currentPrincipals() (principals, error) {
	t := windows.GetCurrentProcessToken()
	u, err := t.GetTokenUser()
	if err != nil {
		return principals{}, fmt.Errorf("read the current user from the process token: %w", err)
	}
	owner, err := tokenOwner(t)
	if err != nil {
		return principals{}, err
	}
	return principals{user: u.User.Sid, owner: owner}, nil
}

// tokenOwner reads TokenOwner, a TOKEN_OWNER: one pointer, to a SID in
// the same buffer. x/sys/windows has no wrapper for it.
func tokenOwner(t windows.Token) (*windows.SID, error) {
	n := uint32(64)
	for {
		b := make([]byte, n)
		err := windows.GetTokenInformation(t, windows.TokenOwner, &b[0], n, &n)
		if errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER) && n > uint32(len(b)) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the default owner from the process token: %w", err)
		}
		return (*struct{ Owner *windows.SID })(unsafe.Pointer(&b[0])).Owner, nil
	}
}

// checkObject opens path itself, never a reparse point's target
// (FILE_FLAG_OPEN_REPARSE_POINT), with only READ_CONTROL and
// FILE_READ_ATTRIBUTES, and checks its attributes, owner and DACL through
// that one handle.
func checkObject(path string, p principals) error {
	name, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := windows.CreateFile(name, windows.READ_CONTROL|windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 {
		return fmt.Errorf("%s is a reparse point (symbolic link, junction or mount point): %w", path, ErrUnsafePath)
	}
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("%s: read security descriptor: %w", path, err)
	}
	owner, _, err := sd.Owner()
	switch {
	case err != nil:
		return fmt.Errorf("%s: read owner: %w", path, err)
	case owner == nil:
		return fmt.Errorf("%s has no owner: %w", path, ErrUnsafePath)
	case !owner.Equals(p.user) && !owner.Equals(p.owner):
		return fmt.Errorf("%s is owned by %s, want %s (the current user): %w", path, owner, p.user, ErrUnsafePath)
	}
	dacl, _, err := sd.DACL()
	switch {
	case errors.Is(err, windows.ERROR_OBJECT_NOT_FOUND) || err == nil && dacl == nil:
		return fmt.Errorf("%s has no DACL, which grants everyone full access: %w", path, ErrUnsafePath)
	case err != nil:
		return fmt.Errorf("%s: read DACL: %w", path, err)
	}
	err = checkDACL(aclBytes(dacl), trustedWriters(sidBytes(p.user), sidBytes(p.owner)))
	runtime.KeepAlive(sd)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", path, err, ErrUnsafePath)
	}
	return nil
}

// aclBytes returns the bytes of acl, whose header holds its size.
func aclBytes(acl *windows.ACL) []byte {
	hdr := unsafe.Slice((*byte)(unsafe.Pointer(acl)), 8)
	return unsafe.Slice((*byte)(unsafe.Pointer(acl)), binary.LittleEndian.Uint16(hdr[2:4]))
}

// sidBytes returns the bytes of a valid SID.
func sidBytes(sid *windows.SID) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(sid)), sid.Len())
}

// checkParents returns dir unchanged: on Windows the directories above
// the store are not checked (an ACL walk up the volume is not done; see
// docs/windows.md), which is the behaviour before checkParents.
func checkParents(dir string, _ int) (string, error) { return dir, nil }
