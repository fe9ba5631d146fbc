// Package objstore is where a store's bytes live: whole objects under
// slash-separated keys, on a local directory (Local) or in an S3-compatible
// bucket (S3), behind one small interface (Store) that the trace store's
// blocks are written to, listed, read (whole or by range) and deleted
// through.
//
// The contract, the same on both backends and proven by one conformance
// suite against both (the S3 one against a real S3 server):
//
//   - Put is atomic: a reader sees the whole new object, the whole old one,
//     or (before the first Put) none, never a part.
//   - Get and GetRange of a missing key fail with an error for which
//     errors.Is(err, ErrNotExist) holds; Delete of a missing key succeeds.
//   - List returns every object under a prefix (a plain string prefix, as
//     in S3, not only a directory), sorted by key; S3 listings are paged
//     internally.
//   - Keys are validated alike by both backends (ValidKey): slash paths of
//     UTF-8 without control characters, no empty, "." or ".." segments,
//     not absolute, at most 1024 bytes, segments at most 255.
//   - Every error is an *Error naming the backend (with its directory, or
//     its endpoint, bucket and prefix), the operation, the key and the
//     reason; ErrNotExist, ErrDenied and ErrRange tell callers the reasons
//     they decide on.
//
// The S3 backend retries what may pass (5xx answers, throttling, timeouts,
// refused or cut connections) with a bounded exponential back-off that
// honours the context, and never what will not (wrong credentials, access
// denied, a missing bucket, a bad request).
//
// Concurrency: a Store is safe for concurrent use by many goroutines and,
// on both backends, by several processes (a writer and readers).
package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Store holds whole objects under keys.
type Store interface {
	// List returns every object whose key starts with prefix ("" for all),
	// sorted by key.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Get returns an object's bytes; the caller owns them.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns n bytes of an object from offset off; a range that
	// passes the object's end fails with ErrRange (n == 0 returns nothing
	// without looking). The caller owns the bytes.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Put stores data under key, replacing any object there, atomically;
	// data in several parts is stored as one object of them one after
	// the other (a block built in pieces is not copied into one). Put
	// does not keep data after it returns.
	Put(ctx context.Context, key string, data ...[]byte) error
	// Delete removes an object; a missing one is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases what the store holds (an S3 store's idle
	// connections); it is safe to call twice. A closed store may still
	// be used (and opens connections again).
	Close() error
}

// Object describes a stored object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Reasons callers decide on; test them with errors.Is.
var (
	// ErrNotExist: no object under the key.
	ErrNotExist = errors.New("not found")
	// ErrDenied: the backend refused the credentials or the access.
	ErrDenied = errors.New("access denied")
	// ErrRange: a range past the object's end.
	ErrRange = errors.New("range past the end of the object")
	// ErrKey: a key this package does not store (see ValidKey).
	ErrKey = errors.New("invalid key")
)

// Error is every error of a Store: which backend, what operation on which
// key, and why (Err, which wraps the reasons above where one applies).
type Error struct {
	Backend string // "local /var/lib/x", "s3 http://127.0.0.1:9000/bucket/prefix/"
	Op      string // list, get, get range, put, delete
	Key     string // the key (List: the prefix)
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s %q: %v", e.Backend, e.Op, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// reason is an error's text with the sentinel it stands for and its cause.
type reason struct {
	msg   string
	kind  error // one of the Err… values, or nil
	cause error // what the backend said, or nil
}

func (r *reason) Error() string {
	if r.cause != nil {
		return r.msg + ": " + r.cause.Error()
	}
	return r.msg
}

func (r *reason) Unwrap() []error {
	var errs []error
	if r.kind != nil {
		errs = append(errs, r.kind)
	}
	if r.cause != nil {
		errs = append(errs, r.cause)
	}
	return errs
}

// Key limits (S3's key length; a common file name length).
const (
	MaxKeyLen     = 1024
	MaxSegmentLen = 255
)

// ValidKey reports why key cannot be stored (an error wrapping ErrKey), or
// nil: a key is a relative slash path of UTF-8 without control characters
// whose segments are neither empty, "." nor "..", at most MaxKeyLen bytes
// and MaxSegmentLen per segment. Local adds one reserved first segment
// (its temporary files' directory).
func ValidKey(key string) error {
	if err := validPath(key); err != nil {
		return &reason{msg: err.Error(), kind: ErrKey}
	}
	return nil
}

func validPath(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("key of %d bytes, more than %d", len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return errors.New("key is not UTF-8")
	case key[0] == '/':
		return errors.New("absolute key")
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("control character %#02x at byte %d", c, i)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return errors.New("empty segment")
		case seg == "." || seg == "..":
			return fmt.Errorf("segment %q", seg)
		case len(seg) > MaxSegmentLen:
			return fmt.Errorf("segment of %d bytes, more than %d", len(seg), MaxSegmentLen)
		}
	}
	return nil
}

// checkRange validates GetRange's arguments.
func checkRange(off, n int64) error {
	if off < 0 || n < 0 || off > 1<<62 || n > 1<<62 {
		return &reason{msg: fmt.Sprintf("bad range: offset %d, length %d", off, n), kind: ErrRange}
	}
	return nil
}
