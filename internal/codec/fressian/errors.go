package fressian

import (
	"errors"
	"strconv"
)

// The kinds of decoding errors. Every error of a Decoder is an *Error that
// matches one of them with errors.Is.
var (
	// ErrTruncated: the payload ends inside a value. Java's reader throws
	// an EOFException there, which zico swallows (the values before it
	// count).
	ErrTruncated = errors.New("payload ends inside a value")

	// ErrMalformed: the bytes are not Fressian as Java's reader reads it
	// (an undefined code, a bad UTF-8 lead byte, a negative length, a cache
	// index out of range, a bad footer, …).
	ErrMalformed = errors.New("malformed Fressian")

	// ErrType: a value of another type than the one asked for (Java's
	// ClassCastException or "expected … at").
	ErrType = errors.New("unexpected Fressian type")

	// ErrLimit: a limit of the Decoder was exceeded.
	ErrLimit = errors.New("limit exceeded")
)

// Error is a decoding error: where and why.
type Error struct {
	// Offset is the payload offset of the byte at which decoding failed.
	Offset int
	// Msg is the reason.
	Msg string
	// Kind is one of ErrTruncated, ErrMalformed, ErrType, ErrLimit.
	Kind error
}

func (e *Error) Error() string {
	return "fressian: offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Unwrap returns the kind, for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }

func hexByte(c byte) string {
	const digits = "0123456789ABCDEF"
	return "0x" + string([]byte{digits[c>>4], digits[c&15]})
}
