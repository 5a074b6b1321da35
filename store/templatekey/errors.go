package templatekey

import "errors"

// Errors returned by DecodeClass, Class.Validate and New. Each is wrapped
// with the field or the numbers that failed; compare with errors.Is.
var (
	// ErrClassTooLarge is returned by DecodeClass when the class JSON is
	// longer than MaxClassSize bytes; nothing is decoded.
	ErrClassTooLarge = errors.New("template class too large")

	// ErrClassInvalid is returned when the class JSON is malformed, is not
	// exactly one object, has an unknown field or trailing data, or when a
	// required field is missing, empty or zero.
	ErrClassInvalid = errors.New("invalid template class")

	// ErrEncodingVersion is returned when key_encoding_version is not
	// EncodingVersion; the message names both numbers.
	ErrEncodingVersion = errors.New("unsupported template key encoding version")

	// ErrClassMismatch is returned by New when the class contradicts the
	// manifest (a snapshot contract other than the manifest version, a
	// hypervisor other than the source hypervisor, a time contract other
	// than the time ABI version); the message names both fields and values.
	ErrClassMismatch = errors.New("template class does not match the manifest")

	// ErrNoManifest is returned by New when the manifest is nil.
	ErrNoManifest = errors.New("template key needs a manifest")
)
