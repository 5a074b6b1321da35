package leasefs

import (
	"fmt"
	"strings"
)

// Sections of docs/tree.md generated from the node table. Each sits in the
// file between its begin and end marker lines (treeSection).
const (
	treeSectionPaths = "paths" // the tree, one line per node kind: its path and what it is
	treeSectionNodes = "nodes" // the node table: mode, links, inode number, cache, content, times
)

// treeSections returns the names of the generated sections of docs/tree.md.
func treeSections() []string { return []string{treeSectionPaths, treeSectionNodes} }

// treeMarkers returns the begin and end marker lines of section name.
func treeMarkers(name string) (begin, end string) {
	return "<!-- begin " + name + ": generated from leasefs/node.go by `go test ./leasefs -run TestTreeMarkdown -update`; do not edit -->",
		"<!-- end " + name + " -->"
}

// treeSection renders section name of docs/tree.md from the node table,
// markers excluded. Errors: an unknown section name.
func treeSection(name string) (string, error) {
	var b strings.Builder
	switch name {
	case treeSectionPaths:
		b.WriteString("```\n")
		for _, k := range Kinds() {
			if k == KindRoot {
				continue
			}
			fmt.Fprintf(&b, "%-47s %s\n", "MNT/"+kindPath(k), unquoted(k.facts().shows))
		}
		b.WriteString("```\n")
	case treeSectionNodes:
		b.WriteString("| node | kind | mode | nlink | `st_ino` | cache | content | mtime and ctime |\n|---|---|---|---|---|---|---|---|\n")
		for _, k := range Kinds() {
			r := k.facts()
			fmt.Fprintf(&b, "| `%s` | %s | %s | %d | %s | %s | %s | %s |\n", kindPath(k), r.name, modeDoc(r), r.nlink, inoDoc(r), r.cache, r.content, r.times)
		}
	default:
		return "", fmt.Errorf("tree section %q: unknown (want one of %s)", name, strings.Join(treeSections(), ", "))
	}
	return b.String(), nil
}

// kindPath is where nodes of kind k appear, e.g. "generations/<gen>/status";
// "/" for the root. Nodes below a generation directory appear under each
// state directory alike.
func kindPath(k Kind) string {
	if k == KindRoot {
		return "/"
	}
	r := k.facts()
	name := r.entry
	if name == "" {
		name = placeholders[r.object]
	}
	if r.mode.IsDir() {
		name += "/"
	}
	if r.parent == KindRoot {
		return name
	}
	return kindPath(r.parent) + name
}

// placeholders name the nodes named by their object.
var placeholders = [...]string{
	objKey:          "<key-id>",
	objGeneration:   "<gen>",
	objPayload:      "<artifact>",
	objLease:        "<clone-id>",
	objIncomingDir:  "<name>",
	objIncomingFile: "<file>",
}

func modeDoc(r *kindFacts) string {
	if r.mode.IsDir() {
		return fmt.Sprintf("dir %04o", uint32(r.mode.Perm()))
	}
	return fmt.Sprintf("%04o", uint32(r.mode.Perm()))
}

func inoDoc(r *kindFacts) string {
	switch r.object {
	case objFixed:
		return fmt.Sprint(r.ino)
	case objPayload:
		var by []string
		for i, a := range artifacts {
			by = append(by, fmt.Sprintf("%s 0x%02x", a, r.class+uint64(i)))
		}
		return fmt.Sprintf("class 0x%02x + artifact index (%s), %s", r.class, strings.Join(by, ", "), objectNumbers[r.object])
	}
	return fmt.Sprintf("class 0x%02x, %s", r.class, objectNumbers[r.object])
}

// unquoted drops the code-span backquotes of s, for a code block.
func unquoted(s string) string { return strings.ReplaceAll(s, "`", "") }
