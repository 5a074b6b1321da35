// Package mountinfo reads the fields of /proc/self/mountinfo, which the
// daemon (is its mount gone?) and the test harness (which mounts exist?)
// both read.
package mountinfo

import (
	"strconv"
	"strings"
)

// Unescape undoes the kernel's \ooo escapes of space, tab, newline and
// backslash in a mountinfo field (a mountpoint, a source). A backslash not
// followed by three octal digits stays as it is.
func Unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
