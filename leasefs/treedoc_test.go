package leasefs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTreeMarkdown keeps the generated sections of docs/tree.md equal to
// the node table (run with -update to rewrite them).
func TestTreeMarkdown(t *testing.T) {
	path := filepath.Join("..", "docs", "tree.md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	want := got
	for _, name := range treeSections() {
		text, err := treeSection(name)
		if err != nil {
			t.Fatal(err)
		}
		if want, err = splice(want, name, text); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// Outside code spans and blocks, < would start an HTML tag and
		// vanish when rendered.
		if name != treeSectionPaths {
			for i, part := range strings.Split(text, "`") {
				if i%2 == 0 && strings.ContainsAny(part, "<>") {
					t.Errorf("section %s has < or > outside a code span: %q", name, part)
				}
			}
		}
	}
	if *update && got != want {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		got = want
	}
	if got != want {
		t.Errorf("%s is out of date; run go test ./leasefs -run TestTreeMarkdown -update", path)
	}
	for _, k := range Kinds() {
		if !strings.Contains(want, "`"+kindPath(k)+"`") {
			t.Errorf("%s lacks a row for %s", path, k)
		}
	}
	if _, err := treeSection("nonesuch"); err == nil {
		t.Error("treeSection of an unknown name succeeded")
	}
}

// splice replaces the lines between section name's markers in doc with
// text. Errors: a marker missing, or out of order.
func splice(doc, name, text string) (string, error) {
	begin, end := treeMarkers(name)
	i, j := strings.Index(doc, begin+"\n"), strings.Index(doc, end+"\n")
	if i < 0 || j < i {
		return "", fmt.Errorf("lacks the lines %s and %s, in that order", begin, end)
	}
	return doc[:i+len(begin)+1] + text + doc[j:], nil
}

// TestNodeTable checks the table's rows: every kind complete, directories
// exactly the listings, rendered files with a render, inode numbers and
// fixed names unique.
func TestNodeTable(t *testing.T) {
	inos := map[uint64]Kind{}
	names := map[Kind]map[string]bool{}
	for _, k := range Kinds() {
		r := k.facts()
		if r.name == "" || r.mode == 0 || r.nlink == 0 || r.cache == 0 || r.content == 0 || r.shows == "" || r.times == "" {
			t.Errorf("%v: incomplete row %+v", k, *r)
		}
		if k.IsDir() != (r.content == ContentListing) {
			t.Errorf("%v: directory %v, content %v", k, k.IsDir(), r.content)
		}
		if (r.content == ContentText || r.content == ContentCommands) && r.render == nil {
			t.Errorf("%v: rendered file without a render", k)
		}
		if r.render != nil && r.stat != nil {
			t.Errorf("%v: both render and stat", k)
		}
		if (r.object == objFixed) != (r.ino != 0) || (r.object == objFixed) == (r.class != 0) {
			t.Errorf("%v: object %d with ino %d, class %#x", k, r.object, r.ino, r.class)
		}
		ino := r.ino
		if ino == 0 {
			ino = r.class << inoClassShift
		}
		if other, ok := inos[ino]; ok {
			t.Errorf("%v and %v share inode number (class) %#x", k, other, ino)
		}
		inos[ino] = k
		if k != KindRoot && r.parent.facts().content != ContentListing {
			t.Errorf("%v: parent %v is not a directory", k, r.parent)
		}
		if r.entry != "" {
			if names[r.parent] == nil {
				names[r.parent] = map[string]bool{}
			}
			if names[r.parent][r.entry] {
				t.Errorf("%v: name %q twice under %v", k, r.entry, r.parent)
			}
			names[r.parent][r.entry] = true
		}
	}
	if got := Kind(0).String(); got != "kind(0)" {
		t.Errorf("Kind(0) = %q", got)
	}
	if got, want := strings.Join(StateDirs(), " "), "generations tombstones retiring"; got != want {
		t.Errorf("StateDirs = %q, want %q", got, want)
	}
}
