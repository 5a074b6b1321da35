package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for _, r := range []struct{ in, want string }{
		{"/mnt/plain", "/mnt/plain"},
		{`/mnt/with\040space`, "/mnt/with space"},
		{`/tab\011and\012newline`, "/tab\tand\nnewline"},
		{`/back\134slash`, `/back\slash`},
		{`/short\04`, `/short\04`},
		{`/not\09octal`, `/not\09octal`},
	} {
		if got := Unescape(r.in); got != r.want {
			t.Errorf("Unescape(%q) = %q, want %q", r.in, got, r.want)
		}
	}
}
