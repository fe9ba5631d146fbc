package kieker

import (
	"errors"
	"strconv"
)

// Sentinel errors. Decoder errors wrap one of them (errors.Is) together with
// a message naming the byte offset or line and the reason.
var (
	// ErrUnknownString: a string id (a class name or a field value) is not
	// in the string table. In dual-socket mode the frame is left unconsumed
	// and the error is not sticky, so the caller may retry once the
	// registry connection delivered more entries; otherwise it is final.
	ErrUnknownString = errors.New("string id not registered")

	// ErrUnknownType: a class name is not in the record catalogue.
	ErrUnknownType = errors.New("record type not in the catalogue")

	// ErrLimit: a configured limit (string length, array length, number of
	// registry entries, line length) was exceeded.
	ErrLimit = errors.New("limit exceeded")

	// ErrMalformed: the bytes do not follow the encoding (a negative length,
	// invalid UTF-8 in a registry entry, a value that does not parse, a
	// value count that fits no layout).
	ErrMalformed = errors.New("malformed input")

	// ErrJavaCharCount is wrapped in addition when an error is most likely
	// caused by Kieker's Java writers sending the UTF-16 char count instead
	// of the byte count as the length of a non-ASCII registry entry.
	// Options.JavaCharCount decodes such streams.
	ErrJavaCharCount = errors.New("likely Kieker's Java char-count bug")

	// ErrConflict: a string id is registered a second time with a
	// different string.
	ErrConflict = errors.New("string id registered twice")
)

// Error is the error type of this package's decoders: the position of the
// offending unit (a byte offset in a binary stream, or a line number in a
// text stream) and the reason. It matches the sentinel errors above with
// errors.Is.
type Error struct {
	// Offset is the absolute stream offset of the offending frame or
	// registry entry (binary), or -1.
	Offset int64
	// Line is the 1-based line number (text), or 0.
	Line int
	// Msg is the reason.
	Msg string
	// Class is the record class name of an ErrUnknownType error.
	Class string

	kinds []error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return "line " + itoa(int64(e.Line)) + ": " + e.Msg
	}
	return "offset " + itoa(e.Offset) + ": " + e.Msg
}

// Is reports whether the error is of the kind target (one of the sentinels).
func (e *Error) Is(target error) bool {
	for _, k := range e.kinds {
		if k == target {
			return true
		}
	}
	return false
}

func offsetError(off int64, msg string, kinds ...error) *Error {
	return &Error{Offset: off, Msg: msg, kinds: kinds}
}

func lineError(line int, msg string, kinds ...error) *Error {
	return &Error{Offset: -1, Line: line, Msg: msg, kinds: kinds}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
