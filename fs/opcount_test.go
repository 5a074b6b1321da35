//go:build linux

package fs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestCountedFSCountsEveryRequest: countedFS declares every method of
// fuse.RawFileSystem that serves a request, so a go-fuse upgrade that adds
// one fails here instead of leaving it uncounted.
func TestCountedFSCountsEveryRequest(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "opcount.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil {
			declared[fn.Name.Name] = true
		}
	}
	notRequests := map[string]bool{"String": true, "SetDebug": true, "Init": true, "OnUnmount": true}
	raw := reflect.TypeFor[fuse.RawFileSystem]()
	for i := range raw.NumMethod() {
		if name := raw.Method(i).Name; !notRequests[name] && !declared[name] {
			t.Errorf("countedFS does not count %s", name)
		}
	}
}
