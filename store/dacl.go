package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The Windows store check (safety_windows.go) reads each object's DACL as
// the raw bytes of an ACL (MS-DTYP §2.4.5) and decides here, in code that
// needs no Windows API and so is tested on every OS.

// aceWriteRights are the access-mask bits that let a principal change an
// object or what a directory holds (MS-DTYP §2.4.3, winnt.h): write or
// append data (add a file or subdirectory), write extended attributes or
// attributes, delete a child, delete, change the DACL or the owner, and
// the generic and MAXIMUM_ALLOWED bits that can stand for any of these.
// Read, execute, READ_CONTROL, SYNCHRONIZE and ACCESS_SYSTEM_SECURITY are
// not write access.
const aceWriteRights = 0x00000002 | // FILE_WRITE_DATA, FILE_ADD_FILE
	0x00000004 | // FILE_APPEND_DATA, FILE_ADD_SUBDIRECTORY
	0x00000010 | // FILE_WRITE_EA
	0x00000040 | // FILE_DELETE_CHILD
	0x00000100 | // FILE_WRITE_ATTRIBUTES
	0x00010000 | // DELETE
	0x00040000 | // WRITE_DAC
	0x00080000 | // WRITE_OWNER
	0x02000000 | // MAXIMUM_ALLOWED
	0x10000000 | // GENERIC_ALL
	0x40000000 // GENERIC_WRITE

// ACE types (MS-DTYP §2.4.4.1) that grant access, and those that only
// deny it.
const (
	aceAllowed               = 0x00
	aceDenied                = 0x01
	aceAllowedObject         = 0x05
	aceDeniedObject          = 0x06
	aceAllowedCallback       = 0x09
	aceDeniedCallback        = 0x0A
	aceAllowedCallbackObject = 0x0B
	aceDeniedCallbackObject  = 0x0C
)

// Well-known SIDs, binary (MS-DTYP §2.4.2.2, §2.4.2.4), that may hold
// write access to a store object besides its owner.
var (
	// sidSystem is LocalSystem, S-1-5-18: the OS itself.
	sidSystem = []byte{1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0}
	// sidAdministrators is BUILTIN\Administrators, S-1-5-32-544.
	sidAdministrators = []byte{1, 2, 0, 0, 0, 0, 0, 5, 32, 0, 0, 0, 0x20, 2, 0, 0}
	// sidCreatorOwner is CREATOR OWNER, S-1-3-0: in an inheritable ACE it
	// stands for whoever creates the child, who needed write access here.
	sidCreatorOwner = []byte{1, 1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0}
	// sidOwnerRights is OWNER RIGHTS, S-1-3-4: the object's current owner.
	sidOwnerRights = []byte{1, 1, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0}
)

// trustedWriters returns the SIDs a store object's DACL may grant write
// access to: the given principals (the current user, and the token's
// default owner when the process is elevated) and SYSTEM, Administrators,
// CREATOR OWNER and OWNER RIGHTS. SYSTEM and Administrators are allowed
// because they can take any object regardless of its DACL, and because
// Windows gives them full control of every user profile directory (and
// OpenVMM's staging DACL is "system + owner full access", §6): refusing
// them would refuse the usual place for a store without making it safer.
func trustedWriters(principals ...[]byte) [][]byte {
	return append(principals, sidSystem, sidAdministrators, sidCreatorOwner, sidOwnerRights)
}

// checkDACL refuses acl, the bytes of an ACL, if any ACE lets a SID not
// in trusted write to the object. Every allow ACE counts, inherit-only
// ones included: they are what new children inherit. Deny ACEs only take
// access away and are skipped. An ACE of any other type, or malformed
// bytes, is refused rather than guessed at. The error names the ACE's
// index, SID and access mask.
func checkDACL(acl []byte, trusted [][]byte) error {
	if len(acl) < 8 {
		return fmt.Errorf("ACL is %d bytes, shorter than its 8-byte header", len(acl))
	}
	if rev := acl[0]; rev != 2 && rev != 4 {
		return fmt.Errorf("ACL revision %d, want 2 or 4", rev)
	}
	size := int(binary.LittleEndian.Uint16(acl[2:4]))
	if size < 8 || size > len(acl) {
		return fmt.Errorf("ACL size %d outside its header and %d bytes", size, len(acl))
	}
	count := int(binary.LittleEndian.Uint16(acl[4:6]))
	off := 8
	for i := range count {
		if size-off < 4 {
			return fmt.Errorf("ACE %d of %d starts at byte %d, past the ACL's %d bytes", i, count, off, size)
		}
		typ := acl[off]
		aceSize := int(binary.LittleEndian.Uint16(acl[off+2 : off+4]))
		if aceSize < 4 || aceSize > size-off {
			return fmt.Errorf("ACE %d at byte %d has size %d, %d bytes left", i, off, aceSize, size-off)
		}
		ace := acl[off : off+aceSize]
		off += aceSize
		switch typ {
		case aceDenied, aceDeniedObject, aceDeniedCallback, aceDeniedCallbackObject:
			continue
		case aceAllowed, aceAllowedObject, aceAllowedCallback, aceAllowedCallbackObject:
		default:
			return fmt.Errorf("ACE %d has type %#x, not an allow or deny ACE", i, typ)
		}
		if len(ace) < 8 {
			return fmt.Errorf("ACE %d is %d bytes, too short for its access mask", i, len(ace))
		}
		mask := binary.LittleEndian.Uint32(ace[4:8])
		if mask&aceWriteRights == 0 {
			continue
		}
		sid, err := aceSID(typ, ace)
		if err != nil {
			return fmt.Errorf("ACE %d: %w", i, err)
		}
		if !slices.ContainsFunc(trusted, func(t []byte) bool { return bytes.Equal(sid, t) }) {
			return fmt.Errorf("ACE %d grants %s write access (mask %#x)", i, sidString(sid), mask)
		}
	}
	return nil
}

// aceSID returns the SID of an allow ACE of type typ. Object ACEs put a
// flags word and up to two GUIDs between the mask and the SID (MS-DTYP
// §2.4.4.3): ACE_OBJECT_TYPE_PRESENT (1) and
// ACE_INHERITED_OBJECT_TYPE_PRESENT (2) say which are there.
func aceSID(typ byte, ace []byte) ([]byte, error) {
	off := 8
	if typ == aceAllowedObject || typ == aceAllowedCallbackObject {
		if len(ace) < 12 {
			return nil, fmt.Errorf("object ACE is %d bytes, too short for its flags", len(ace))
		}
		flags := binary.LittleEndian.Uint32(ace[8:12])
		off = 12
		if flags&1 != 0 {
			off += 16
		}
		if flags&2 != 0 {
			off += 16
		}
	}
	if off > len(ace) {
		return nil, fmt.Errorf("SID would start at byte %d of a %d-byte ACE", off, len(ace))
	}
	n, err := sidLen(ace[off:])
	if err != nil {
		return nil, err
	}
	return ace[off : off+n], nil
}

// sidLen returns the length of the SID at the start of b (MS-DTYP
// §2.4.2.2): revision 1, a sub-authority count of at most 15, a 6-byte
// authority, then 4 bytes per sub-authority.
func sidLen(b []byte) (int, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("SID needs 8 bytes, %d left", len(b))
	}
	if b[0] != 1 || b[1] > 15 {
		return 0, fmt.Errorf("SID revision %d with %d sub-authorities, want revision 1 and at most 15", b[0], b[1])
	}
	n := 8 + 4*int(b[1])
	if n > len(b) {
		return 0, fmt.Errorf("SID with %d sub-authorities needs %d bytes, %d left", b[1], n, len(b))
	}
	return n, nil
}

// sidString renders a binary SID in its S-1-... form (MS-DTYP §2.4.2.1);
// the authority is decimal below 2^32 and hex above. b must be a whole SID
// (sidLen).
func sidString(b []byte) string {
	var s strings.Builder
	s.WriteString("S-" + strconv.Itoa(int(b[0])) + "-")
	auth := uint64(0)
	for _, c := range b[2:8] {
		auth = auth<<8 | uint64(c)
	}
	if auth < 1<<32 {
		s.WriteString(strconv.FormatUint(auth, 10))
	} else {
		fmt.Fprintf(&s, "0x%012X", auth)
	}
	for i := range int(b[1]) {
		s.WriteString("-" + strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b[8+4*i:])), 10))
	}
	return s.String()
}
