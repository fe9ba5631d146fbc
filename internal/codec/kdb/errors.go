package kdb

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Sentinel errors; every error of the decoders and encoders is an *Error
// that wraps one of them, so callers test with errors.Is and read the
// position with errors.As.
var (
	// ErrUnknownID: the record id is not in the mapping.
	ErrUnknownID = errors.New("unknown type id")
	// ErrLimit: a string, array or record is larger than its limit.
	ErrLimit = errors.New("over the limit")
	// ErrInvalid: malformed input (negative length, a value that does not
	// parse, a wrong number of fields) or a value an encoder cannot write.
	ErrInvalid = errors.New("invalid")
	// ErrTruncated: the stream ended inside a record (see Decoder.End).
	ErrTruncated = errors.New("truncated record")
	// ErrUnmapped: an Encoder was given a record whose type has no id.
	ErrUnmapped = errors.New("type not in the mapping")
)

// Error reports input the decoders reject or a record the encoders cannot
// write. Error() reads like "offset 88: BeforeOperationEvent field
// operationSignature: string length -3" or "line 2: BeforeOperationEvent:
// 4 fields where 5 were expected".
type Error struct {
	Offset int64  // binary decoding: stream offset of the record's first byte; -1 otherwise
	Line   int    // text decoding: 1-based line of the record in its message; 0 otherwise
	Type   string // short name of the record type, when known
	Field  string // field name, when known
	Reason string // what is wrong
	Err    error  // ErrUnknownID, ErrLimit, ErrInvalid, ErrTruncated or ErrUnmapped
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Offset >= 0:
		b.WriteString("offset ")
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	case e.Line > 0:
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
	default:
		b.WriteString("encode")
	}
	b.WriteString(": ")
	if e.Type != "" {
		b.WriteString(e.Type)
		if e.Field != "" {
			b.WriteString(" field ")
			b.WriteString(e.Field)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Default limits.
const (
	// DefaultMaxStringLen is the original KDB's cap on one string (bytes).
	DefaultMaxStringLen = 64 << 10
	// DefaultMaxArrayLen caps the element count of one array field.
	DefaultMaxArrayLen = 64 << 10
	// DefaultMaxRecordSize caps one binary record, id included (bytes).
	DefaultMaxRecordSize = 1 << 20
)

// Options configures decoders and encoders. Zero values select the
// defaults.
type Options struct {
	// MaxStringLen is the largest string in bytes (text: after unescaping).
	MaxStringLen int
	// MaxArrayLen is the largest element count of an array field.
	MaxArrayLen int
	// MaxRecordSize is the largest binary record in bytes, id included. It
	// also bounds the bytes a source buffers for one incomplete record.
	// The text dialect does not use it (a message is already in memory).
	MaxRecordSize int
	// Interner interns decoded strings. Nil gives the decoder its own.
	// Give each connection its own: an Interner is not safe for concurrent
	// use.
	Interner *record.Interner
}

type limits struct {
	str, arr, rec int
}

func (o Options) limits() limits {
	l := limits{str: o.MaxStringLen, arr: o.MaxArrayLen, rec: o.MaxRecordSize}
	if l.str <= 0 {
		l.str = DefaultMaxStringLen
	}
	if l.arr <= 0 {
		l.arr = DefaultMaxArrayLen
	}
	if l.rec <= 0 {
		l.rec = DefaultMaxRecordSize
	}
	return l
}

func (o Options) interner() *record.Interner {
	if o.Interner != nil {
		return o.Interner
	}
	return &record.Interner{}
}
