package leasefs

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/store"
)

var update = flag.Bool("update", false, "rewrite docs/errno.md and the generated sections of docs/tree.md from their tables")

func TestToErrno(t *testing.T) {
	if got := ToErrno(nil); got != OK {
		t.Errorf("ToErrno(nil) = %v, want OK", got)
	}
	for _, r := range ErrnoTable() {
		t.Run(r.Name, func(t *testing.T) {
			wrapped := fmt.Errorf("outer: %w", fmt.Errorf("inner %q: %w", "x", r.Err))
			if got := ToErrno(wrapped); got != r.Errno {
				t.Errorf("ToErrno(wrapped %s) = %v, want %v", r.Name, got, r.Errno)
			}
			joined := errors.Join(errors.New("other"), r.Err)
			if got := ToErrno(joined); got != r.Errno {
				t.Errorf("ToErrno(joined %s) = %v, want %v", r.Name, got, r.Errno)
			}
		})
	}
}

func TestToErrnoUnmapped(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	err := fmt.Errorf("read index: %w", io.ErrUnexpectedEOF)
	if got := ToErrno(err); got != EIO {
		t.Fatalf("ToErrno(unmapped) = %v, want EIO", got)
	}
	if out := buf.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "read index: unexpected EOF") ||
		!strings.Contains(out, "*fmt.wrapError -> *errors.errorString") {
		t.Errorf("log line lacks level, text or chain: %s", out)
	}
}

// refusalCounter is an Observer that counts refusals by errno and reason.
type refusalCounter map[string]int

func (c refusalCounter) Refused(errno, reason string) { c[errno+" "+reason]++ }

func TestRefuseLogs(t *testing.T) {
	var buf bytes.Buffer
	counted := refusalCounter{}
	f := &FS{log: slog.New(slog.NewTextHandler(&buf, nil)), obs: counted}
	err := fmt.Errorf("create lease %q: %w", "c", ErrNotPermitted)
	if got := f.Refuse("create", "leases/c", err); got != EPERM {
		t.Fatalf("Refuse = %v, want EPERM", got)
	}
	f.Refuse("read", "store", io.ErrUnexpectedEOF)
	if want := (refusalCounter{"EPERM leasefs.ErrNotPermitted": 1, "EIO unmatched": 1}); fmt.Sprint(counted) != fmt.Sprint(want) {
		t.Errorf("Observer counted %v, want %v", counted, want)
	}
	for _, want := range []string{"level=WARN", "op=create", "path=leases/c", "errno=EPERM", `err="create lease \"c\": operation not permitted here"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log line lacks %s: %s", want, buf.String())
		}
	}
	buf.Reset()
	if got := f.Refuse("create", "x", nil); got != OK || buf.Len() != 0 {
		t.Errorf("Refuse(nil) = %v and logged %q, want OK and nothing", got, buf.String())
	}
}

// TestErrnoValues: every Errno has a name and a doc, and every Errno other
// than OK and EIO is produced by some row (no dead values).
func TestErrnoValues(t *testing.T) {
	used := map[Errno]bool{OK: true, EIO: true}
	for _, r := range ErrnoTable() {
		used[r.Errno] = true
		if r.Name == "" || r.Reason == "" || r.Err == nil {
			t.Errorf("incomplete row %+v", r)
		}
	}
	for _, e := range Errnos() {
		if strings.HasPrefix(e.String(), "Errno(") || e.Doc() == "" {
			t.Errorf("Errno %d has no name or doc", int(e))
		}
		if !used[e] {
			t.Errorf("Errno %v is produced by no row", e)
		}
	}
	if got := Errno(len(Errnos())).String(); !strings.HasPrefix(got, "Errno(") {
		t.Errorf("out-of-range Errno named %q", got)
	}
}

// TestErrnoMarkdown keeps docs/errno.md equal to the table (run with
// -update to rewrite it).
func TestErrnoMarkdown(t *testing.T) {
	path := filepath.Join("..", "docs", "errno.md")
	want := ErrnoMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./leasefs -run TestErrnoMarkdown -update)", err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date; run go test ./leasefs -run TestErrnoMarkdown -update", path)
	}
	for _, r := range ErrnoTable() {
		if !strings.Contains(want, "`"+r.Name+"`") {
			t.Errorf("markdown lacks row %s", r.Name)
		}
	}
	// Outside code spans, < would start an HTML tag and vanish when rendered.
	for i, part := range strings.Split(want, "`") {
		if i%2 == 0 && strings.ContainsAny(part, "<>") {
			t.Errorf("markdown has < or > outside a code span: %q", part)
		}
	}
}

// TestOpenErrno: a failed open for writing or truncating is a refusal,
// logged once; a failed read-only open is mapped without a log line.
func TestOpenErrno(t *testing.T) {
	var buf bytes.Buffer
	f := &FS{log: slog.New(slog.NewTextHandler(&buf, nil))}
	err := fmt.Errorf("open payload file for writing: %w", ErrReadOnly)
	for _, fl := range []OpenFlags{{Write: true}, {Truncate: true}} {
		buf.Reset()
		if got := f.OpenErrno("generations/g000001/payload/state.bin", fl, err); got != EROFS || !strings.Contains(buf.String(), "op=open") {
			t.Errorf("OpenErrno(%+v) = %v, logged %q; want EROFS, logged", fl, got, buf.String())
		}
	}
	buf.Reset()
	if got := f.OpenErrno("leases/x", OpenFlags{}, fmt.Errorf("gone: %w", store.ErrNotFound)); got != ENOENT || buf.Len() != 0 {
		t.Errorf("read-only OpenErrno = %v, logged %q; want ENOENT, nothing", got, buf.String())
	}
	if got := f.OpenErrno("x", OpenFlags{Write: true}, nil); got != OK || buf.Len() != 0 {
		t.Errorf("OpenErrno(nil) = %v, logged %q", got, buf.String())
	}
}
