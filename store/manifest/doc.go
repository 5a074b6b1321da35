// Package manifest reads and writes OpenVMM capture manifests (manifest.bin)
// and opens capture directories.
//
// A manifest is one protobuf-wire message (SnapshotManifest) with no header,
// length prefix or checksum (openvmm-snapshot-format.md §2.1). Decode is the
// project's own bounded decoder: it refuses inputs larger than
// MaxManifestSize and enforces every count and size bound while it decodes,
// before anything is appended or copied (§5.3), so a hostile manifest cannot
// make the reader allocate more than a small multiple of its own size.
// Validate applies the header, version and contract rules of §5; Encode is
// the deterministic writer of §4, used to build sample captures (Sample).
// OpenCapture opens a capture directory the way OpenVMM does (§1, §5.1).
//
// Conventions:
//   - Field names in errors and in Text use the format's snake_case names
//     with dotted paths and indexes, e.g.
//     manifest.machine_contract.devices[6].ranges[0].
//   - Errors wrap one sentinel of errors.go; compare with errors.Is.
//   - Decode and Encode are platform-neutral; OpenCapture needs Unix.
package manifest
