//go:build linux && cgo && fuse3

package winfsp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestCountedFileSystemCountsEveryCallback: every callback fileSystem
// serves is declared on countedFileSystem too, so a new one fails here
// instead of going uncounted (a promoted method would not count).
func TestCountedFileSystemCountsEveryCallback(t *testing.T) {
	methods := map[string]map[string]bool{"fileSystem": {}, "countedFileSystem": {}}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && methods[id.Name] != nil {
				methods[id.Name][fn.Name.Name] = true
			}
		}
	}
	for name := range methods["fileSystem"] {
		if name != "Init" && !methods["countedFileSystem"][name] {
			t.Errorf("countedFileSystem does not count %s", name)
		}
	}
}
