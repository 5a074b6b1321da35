package store

import (
	"strings"
	"testing"
)

func TestParseMachineGUID(t *testing.T) {
	want := [16]byte{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{"registry form", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", false},
		{"braces, upper case", "{6BA7B810-9DAD-11D1-80B4-00C04FD430C8}", false},
		{"no dashes, white space", " 6ba7b8109dad11d180b400c04fd430c8\n", false},
		{"one brace", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8", true},
		{"31 digits", "6ba7b810-9dad-11d1-80b4-00c04fd430c", true},
		{"not hex", "6ba7b810-9dad-11d1-80b4-00c04fd430cg", true},
		{"empty", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMachineGUID("MachineGuid", tt.in)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "MachineGuid: want 32 hex digits") {
					t.Errorf("got %x, %v; want an error naming MachineGuid", got, err)
				}
				return
			}
			if err != nil || got != want {
				t.Errorf("got %x, %v; want %x", got, err, want)
			}
		})
	}
}

func TestBootIDFromDWORD(t *testing.T) {
	tests := []struct {
		in   uint32
		want [16]byte
	}{
		{0, [16]byte{}},
		{1, [16]byte{1}},
		{0x12345678, [16]byte{0x78, 0x56, 0x34, 0x12}},
		{0xffffffff, [16]byte{0xff, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		if got := bootIDFromDWORD(tt.in); got != tt.want {
			t.Errorf("bootIDFromDWORD(%#x) = %x, want %x", tt.in, got, tt.want)
		}
	}
}
