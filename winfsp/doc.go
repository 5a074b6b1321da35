// Package winfsp mounts the templatefs namespace (package leasefs) through
// github.com/winfsp/cgofuse: over WinFsp on Windows, where it builds
// without cgo (CGO_ENABLED=0) and is the only backend, and over libfuse3 on
// Linux with cgo and the fuse3 build tag, where it exists so the same
// conformance suite (tests/conformance) exercises it; the Linux default
// stays go-fuse (package fs). Like package fs it only translates: each
// callback resolves its path with leasefs.FS.Walk, calls one leasefs.FS
// method and maps the error (errno.go). Without Windows or the fuse3 tag
// and cgo the package holds only this comment; docs/windows.md says how
// to install WinFsp and what differs on Windows.
package winfsp
