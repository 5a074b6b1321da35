//go:build windows || (linux && cgo && fuse3)

package winfsp

import (
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"unsafe"

	"github.com/winfsp/cgofuse/fuse"
)

// stopHostSignals turns off cgofuse's signal handler of host
// (MountOptions.OwnSignals). cgofuse v1.6.0 (fuse/host.go) registers
// FileSystemHost.sigc for SIGINT and SIGTERM in its init callback, before
// ours runs, and unmounts lazily on the first signal; it offers no option
// to leave them to the caller, so this stops that unexported channel's
// notifications (signal.Stop). When the field is not there (another
// cgofuse version) it logs a warning and leaves the handler on. On
// Windows cgofuse registers none, so there is nothing to stop.
func stopHostSignals(host *fuse.FileSystemHost) {
	f := reflect.ValueOf(host).Elem().FieldByName("sigc")
	if !f.IsValid() || f.Type() != reflect.TypeOf((chan os.Signal)(nil)) {
		slog.Warn("cgofuse has no FileSystemHost.sigc: its own SIGINT/SIGTERM handler stays on and may detach the mount by itself")
		return
	}
	if c := *(*chan os.Signal)(unsafe.Pointer(f.UnsafeAddr())); c != nil {
		signal.Stop(c)
	}
}
