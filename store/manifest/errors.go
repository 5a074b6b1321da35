package manifest

import "errors"

// Wire errors, returned by Decode.
var (
	// ErrTooLarge is returned when a manifest is larger than
	// MaxManifestSize, by Decode before it reads a byte and by OpenCapture
	// before it reads the file.
	ErrTooLarge = errors.New("manifest too large")
	// ErrTruncated is returned when a tag, varint or length-delimited value
	// runs past the end of its message.
	ErrTruncated = errors.New("manifest truncated")
	// ErrMalformed is returned for wire-level damage other than truncation:
	// an invalid field number, a varint longer than 10 bytes, a group or
	// mesh resource wire type, a known field with the wrong wire type, or a
	// string that is not valid UTF-8.
	ErrMalformed = errors.New("manifest malformed")
)

// Bound errors, returned by Decode when a field exceeds a limit of limits.go.
var (
	// ErrFieldTooLarge is returned when a string or bytes field is longer
	// than its limit.
	ErrFieldTooLarge = errors.New("manifest field too large")
	// ErrTooMany is returned when a repeated field has more elements than
	// its limit.
	ErrTooMany = errors.New("too many elements in manifest field")
)

// Validation errors, returned by Validate.
var (
	// ErrUnsupportedVersion is returned when the manifest version is not one
	// of SupportedVersions.
	ErrUnsupportedVersion = errors.New("unsupported manifest version")
	// ErrBadMagic is returned when format_magic is not the magic of the
	// manifest's version.
	ErrBadMagic = errors.New("bad manifest format magic")
	// ErrInvalid is returned when a decoded manifest breaks a rule of
	// openvmm-snapshot-format.md §5 other than version and magic.
	ErrInvalid = errors.New("invalid manifest")
)

// Capture directory errors, returned by OpenCapture.
var (
	// ErrUnexpectedArtifact is returned when a capture directory holds an
	// entry that is not one of the expected artifacts (including
	// resume.claim).
	ErrUnexpectedArtifact = errors.New("unexpected capture artifact")
	// ErrIncompleteCapture is returned when an expected artifact is missing.
	ErrIncompleteCapture = errors.New("incomplete capture")
	// ErrArtifactSize is returned when an artifact's length differs from
	// the length the manifest declares.
	ErrArtifactSize = errors.New("capture artifact has the wrong size")
	// ErrNotRegular is returned when the capture directory is a symlink or
	// not a directory, or an artifact is a symlink or not a regular file.
	ErrNotRegular = errors.New("not a regular file or directory")
)
