// Package store keeps OpenVMM capture templates as immutable generations
// in a directory indexed by bbolt: publication, compatibility keys,
// leases bound to clone processes, tombstones and retirement.
//
// # Platforms
//
// The store builds for Linux and Windows only. Each OS supplies the same
// unexported functions in its own files, as bbolt does (bolt_unix.go,
// bolt_windows.go), plus the Processes implementation and ReadHostFacts:
//
//   - safety_unix.go, safety_windows.go: mkdirPrivate, checkPrivate,
//     checkTree and checkParents. On Unix every path in the store is owned
//     by the effective uid, not writable by group or others, and a
//     directory or regular file (or, for ControlSocket only, the daemon's
//     socket), and no directory above it lets another user replace it
//     (Windows does not check the parents). On
//     Windows every path's owner is the current user, its DACL grants
//     write access to nobody else (checkDACL in dacl.go decides, and
//     allows SYSTEM and Administrators), and no path is a reparse point.
//   - platform_unix.go, platform_linux.go, platform_windows.go: syncDir,
//     renameNoReplace, openNoFollow, openBeneath (openat2 with
//     RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH on Linux), openDir, linkCount,
//     stampOf, the lock file's owner pid and killSelf for fail
//     points. Linux fsyncs directories, renames
//     with RENAME_NOREPLACE and copies sparse files by extent; Windows
//     flushes files with FlushFileBuffers, renames with MoveFileEx and
//     MOVEFILE_WRITE_THROUGH, does not flush directories (syncDir says
//     why) and copies densely (openvmm-snapshot-format.md §1).
//   - process_linux.go, process_windows.go: Processes, with pidfds on
//     Linux and process handles and creation times on Windows.
//   - host_linux.go, host_windows.go: ReadHostFacts (§3.1).
//
// Locking is gofrs/flock on both (flock(2), LockFileEx). Other Unix
// systems, macOS included, are not supported: they have no
// renameat2(RENAME_NOREPLACE) or pidfds, and §3.1 defines no host clock
// for them.
package store
