//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"os"
	"reflect"
	"testing"

	"github.com/winfsp/cgofuse/fuse"
)

// TestHostSignalsField: the cgofuse field stopHostSignals turns off is
// there, so an upgrade of cgofuse that renames it fails here rather than
// leaving cgofuse's own handler to detach a restarting daemon's mount.
func TestHostSignalsField(t *testing.T) {
	f := reflect.ValueOf(fuse.NewFileSystemHost(&fuse.FileSystemBase{})).Elem().FieldByName("sigc")
	if !f.IsValid() || f.Type() != reflect.TypeOf((chan os.Signal)(nil)) {
		t.Fatalf("cgofuse FileSystemHost has no sigc chan os.Signal field (%v): update stopHostSignals", f)
	}
	stopHostSignals(fuse.NewFileSystemHost(&fuse.FileSystemBase{})) // nil channel before a mount: nothing to stop, no panic
}
