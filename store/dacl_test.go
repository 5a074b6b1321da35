package store

import (
	"encoding/binary"
	"strings"
	"testing"
)

// Binary SIDs for the tests (MS-DTYP §2.4.2.2).
var (
	sidEveryone     = []byte{1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}                 // S-1-1-0
	sidAuthUsers    = []byte{1, 1, 0, 0, 0, 0, 0, 5, 11, 0, 0, 0}                // S-1-5-11
	sidUsers        = []byte{1, 2, 0, 0, 0, 0, 0, 5, 32, 0, 0, 0, 0x21, 2, 0, 0} // S-1-5-32-545
	sidCreatorGroup = []byte{1, 1, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0}                 // S-1-3-1
	sidMe           = userSID(1001)                                              // S-1-5-21-10-20-30-1001
	sidOther        = userSID(1002)
)

func userSID(rid uint32) []byte {
	b := []byte{1, 5, 0, 0, 0, 0, 0, 5}
	for _, sub := range []uint32{21, 10, 20, 30, rid} {
		b = binary.LittleEndian.AppendUint32(b, sub)
	}
	return b
}

// ace builds an ACE of a type whose SID follows the mask (allow, deny,
// callback).
func ace(typ, flags byte, mask uint32, sid []byte) []byte {
	b := []byte{typ, flags, 0, 0}
	b = binary.LittleEndian.AppendUint32(b, mask)
	b = append(b, sid...)
	binary.LittleEndian.PutUint16(b[2:4], uint16(len(b)))
	return b
}

// objectACE builds an object ACE with objFlags saying which GUIDs follow.
func objectACE(typ byte, mask, objFlags uint32, sid []byte) []byte {
	b := []byte{typ, 0, 0, 0}
	b = binary.LittleEndian.AppendUint32(b, mask)
	b = binary.LittleEndian.AppendUint32(b, objFlags)
	for bit := uint32(1); bit <= 2; bit <<= 1 {
		if objFlags&bit != 0 {
			b = append(b, make([]byte, 16)...)
		}
	}
	b = append(b, sid...)
	binary.LittleEndian.PutUint16(b[2:4], uint16(len(b)))
	return b
}

func acl(aces ...[]byte) []byte {
	b := []byte{2, 0, 0, 0, 0, 0, 0, 0}
	for _, a := range aces {
		b = append(b, a...)
	}
	binary.LittleEndian.PutUint16(b[2:4], uint16(len(b)))
	binary.LittleEndian.PutUint16(b[4:6], uint16(len(aces)))
	return b
}

const (
	fullAccess  = 0x001f01ff // FILE_ALL_ACCESS
	modify      = 0x001301bf
	readExecute = 0x001200a9
	oici        = 0x03 // OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
	oiciio      = 0x0b // ... | INHERIT_ONLY_ACE
	inherited   = 0x10 // INHERITED_ACE
)

func TestCheckDACL(t *testing.T) {
	tests := []struct {
		name    string
		acl     []byte
		wantErr string // "" for accepted
	}{
		{"profile directory", acl(
			ace(aceAllowed, oici|inherited, fullAccess, sidSystem),
			ace(aceAllowed, oici|inherited, fullAccess, sidAdministrators),
			ace(aceAllowed, oici|inherited, fullAccess, sidMe)), ""},
		{"OpenVMM staging DACL", acl(
			ace(aceAllowed, oici, fullAccess, sidSystem),
			ace(aceAllowed, oici, fullAccess, sidMe)), ""},
		{"no ACEs", acl(), ""},
		{"everyone may read and execute", acl(
			ace(aceAllowed, 0, fullAccess, sidMe),
			ace(aceAllowed, oici, readExecute, sidEveryone)), ""},
		{"CREATOR OWNER and OWNER RIGHTS", acl(
			ace(aceAllowed, oiciio, 0x10000000, sidCreatorOwner),
			ace(aceAllowed, 0, fullAccess, sidOwnerRights)), ""},
		{"deny ACEs are skipped", acl(
			ace(aceDenied, 0, fullAccess, sidEveryone),
			ace(aceDeniedCallback, 0, fullAccess, sidOther),
			ace(aceAllowed, 0, fullAccess, sidMe)), ""},
		{"object ACE for the owner", acl(
			objectACE(aceAllowedObject, fullAccess, 3, sidMe)), ""},
		{"authenticated users may modify", acl(
			ace(aceAllowed, oici|inherited, fullAccess, sidMe),
			ace(aceAllowed, oici|inherited, modify, sidAuthUsers)), "ACE 1 grants S-1-5-11 write access (mask 0x1301bf)"},
		{"inherit-only add-file for users counts", acl(
			ace(aceAllowed, 0x02|0x08, 0x2, sidUsers)), "ACE 0 grants S-1-5-32-545 write access (mask 0x2)"},
		{"inherit-only GENERIC_ALL for everyone", acl(
			ace(aceAllowed, oiciio, 0x10000000, sidEveryone)), "grants S-1-1-0 write access"},
		{"CREATOR GROUP is not trusted", acl(
			ace(aceAllowed, oiciio, 0x10000000, sidCreatorGroup)), "grants S-1-3-1 write access"},
		{"another user with WRITE_DAC", acl(
			ace(aceAllowed, 0, 0x00040000|readExecute, sidOther)), "grants S-1-5-21-10-20-30-1002 write access"},
		{"callback ACE", acl(
			ace(aceAllowedCallback, 0, modify, sidOther)), "grants S-1-5-21-10-20-30-1002 write access"},
		{"object ACE, both GUIDs", acl(
			objectACE(aceAllowedObject, modify, 3, sidOther)), "ACE 0 grants S-1-5-21-10-20-30-1002"},
		{"callback object ACE, inherited GUID only", acl(
			objectACE(aceAllowedCallbackObject, modify, 2, sidOther)), "grants S-1-5-21-10-20-30-1002"},
		{"mandatory label ACE", acl(
			ace(0x11, 0, 0x1, sidEveryone)), "ACE 0 has type 0x11"},
		{"short header", []byte{2, 0, 8, 0}, "shorter than its 8-byte header"},
		{"revision 3", func() []byte { b := acl(); b[0] = 3; return b }(), "ACL revision 3"},
		{"size past the bytes", func() []byte { b := acl(); b[2] = 16; return b }(), "ACL size 16"},
		{"more ACEs than bytes", func() []byte { b := acl(ace(aceAllowed, 0, fullAccess, sidMe)); b[4] = 2; return b }(), "ACE 1 of 2 starts at byte"},
		{"ACE size past the ACL", func() []byte {
			b := acl(ace(aceAllowed, 0, fullAccess, sidMe))
			b[8+2] = 200
			return b
		}(), "has size 200"},
		{"SID cut short", func() []byte {
			a := ace(aceAllowed, 0, fullAccess, sidMe)
			a[8+1] = 9 // claims 9 sub-authorities, has 5
			return acl(a)
		}(), "ACE 0: SID with 9 sub-authorities needs 44 bytes"},
		{"object ACE too short for its GUIDs", func() []byte {
			a := objectACE(aceAllowedObject, modify, 3, sidOther)[:12+32]
			a[2] = 12 + 32 // the ACE ends after its two GUIDs
			return acl(a)
		}(), "ACE 0: SID needs 8 bytes, 0 left"},
		{"object ACE claims GUIDs it lacks", func() []byte {
			a := objectACE(aceAllowedObject, modify, 0, sidOther)[:12]
			a[2], a[8] = 12, 3
			return acl(a)
		}(), "SID would start at byte 44 of a 12-byte ACE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDACL(tt.acl, trustedWriters(sidMe))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("accepted, want an error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestCheckDACLRights grants each access right alone to another user.
func TestCheckDACLRights(t *testing.T) {
	tests := []struct {
		name  string
		mask  uint32
		write bool
	}{
		{"FILE_READ_DATA", 0x1, false},
		{"FILE_WRITE_DATA", 0x2, true},
		{"FILE_APPEND_DATA", 0x4, true},
		{"FILE_READ_EA", 0x8, false},
		{"FILE_WRITE_EA", 0x10, true},
		{"FILE_EXECUTE", 0x20, false},
		{"FILE_DELETE_CHILD", 0x40, true},
		{"FILE_READ_ATTRIBUTES", 0x80, false},
		{"FILE_WRITE_ATTRIBUTES", 0x100, true},
		{"DELETE", 0x10000, true},
		{"READ_CONTROL", 0x20000, false},
		{"WRITE_DAC", 0x40000, true},
		{"WRITE_OWNER", 0x80000, true},
		{"SYNCHRONIZE", 0x100000, false},
		{"ACCESS_SYSTEM_SECURITY", 0x1000000, false},
		{"MAXIMUM_ALLOWED", 0x2000000, true},
		{"GENERIC_ALL", 0x10000000, true},
		{"GENERIC_EXECUTE", 0x20000000, false},
		{"GENERIC_WRITE", 0x40000000, true},
		{"GENERIC_READ", 0x80000000, false},
		{"FILE_GENERIC_READ", 0x120089, false},
		{"FILE_GENERIC_EXECUTE", 0x1200a0, false},
		{"FILE_GENERIC_WRITE", 0x120116, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDACL(acl(ace(aceAllowed, 0, tt.mask, sidOther)), trustedWriters(sidMe))
			if (err != nil) != tt.write {
				t.Errorf("mask %#x: got %v, want refused %v", tt.mask, err, tt.write)
			}
		})
	}
}

// TestTrustedWriters checks that the token's default owner, when passed,
// is trusted like the user.
func TestTrustedWriters(t *testing.T) {
	a := acl(ace(aceAllowed, 0, fullAccess, sidOther))
	if err := checkDACL(a, trustedWriters(sidMe)); err == nil {
		t.Error("another user's full access accepted")
	}
	if err := checkDACL(a, trustedWriters(sidMe, sidOther)); err != nil {
		t.Errorf("full access of a trusted principal refused: %v", err)
	}
}

func TestSIDString(t *testing.T) {
	tests := []struct {
		sid  []byte
		want string
	}{
		{sidSystem, "S-1-5-18"},
		{sidAdministrators, "S-1-5-32-544"},
		{sidEveryone, "S-1-1-0"},
		{sidMe, "S-1-5-21-10-20-30-1001"},
		{[]byte{1, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, "S-1-0-4294967295"},
		{[]byte{1, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc}, "S-1-0x123456789ABC"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if n, err := sidLen(tt.sid); err != nil || n != len(tt.sid) {
				t.Fatalf("sidLen = %d, %v; want %d", n, err, len(tt.sid))
			}
			if got := sidString(tt.sid); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}
