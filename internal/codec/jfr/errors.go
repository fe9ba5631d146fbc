package jfr

import (
	"errors"
	"fmt"
)

// FormatError describes bytes that do not follow the JFR format or exceed a
// limit. Offset is the position in the file (the chunk's base as given to
// Stream.Open plus the position inside the chunk).
type FormatError struct {
	Offset int64
	Reason string
	Err    error // an underlying sentinel such as ErrUnsupportedVersion, or nil
}

func (e *FormatError) Error() string {
	if e.Err != nil && !errors.Is(e.Err, errFormat) {
		return fmt.Sprintf("offset %d: %s (%v)", e.Offset, e.Reason, e.Err)
	}
	return fmt.Sprintf("offset %d: %s", e.Offset, e.Reason)
}

func (e *FormatError) Unwrap() error { return e.Err }

// errFormat marks decoding failures inside an event or pool entry; the
// position is added when the failure is reported.
var errFormat = errors.New("jfr: malformed data")

// at returns a FormatError for a failure at chunk offset off.
func at(base, off int64, format string, args ...any) *FormatError {
	return &FormatError{Offset: base + off, Reason: fmt.Sprintf(format, args...)}
}
