//go:build ignore

// The fixed part of the Go code tracebridge gen writes. The generator
// writes the "Code generated" line, the package comment and clause and the
// imports the types need; it adds the parts registryID, appendBool,
// appendString and checkLen after the record types when they use them.

package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// gen:part prelude (after it: the record types)
// Record is implemented by every record type of this package.
type Record interface {
	// KiekerClass returns the fully qualified Kieker class name.
	KiekerClass() string
	// AppendKDB appends the record in the KDB binary dialect under id
	// (int32 id | fields; strings as int32 byte length + UTF-8 bytes).
	AppendKDB(dst []byte, id int32) ([]byte, error)
	// AppendKieker appends the record as a Kieker binary frame
	// (int32 classNameId | int64 loggingTimestamp | fields; strings as
	// registry ids), preceded by a registry entry for each string reg has
	// not seen yet.
	AppendKieker(dst []byte, reg *Registry, loggingTimestamp int64) ([]byte, error)
}

// NoTimestamp is the logging timestamp of a record that has none.
const NoTimestamp int64 = -1

var (
	// ErrTooLong: a string or array is longer than an int32 length allows.
	ErrTooLong = errors.New("longer than 2147483647")
	// ErrNoRegistry: AppendKieker was given a nil registry.
	ErrNoRegistry = errors.New("nil registry")
)

// Registry is the string registry of one Kieker connection: it assigns ids
// from 0 in order of first use. The zero value is ready to use. A Registry
// is not safe for concurrent use.
type Registry struct {
	ids map[string]int32
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Len returns the number of registered strings.
func (r *Registry) Len() int { return len(r.ids) }

// Lookup returns the id of s, if it is registered.
func (r *Registry) Lookup(s string) (int32, bool) {
	id, ok := r.ids[s]
	return id, ok
}

// add returns the id of s, registering s when it is new and then
// appending its registry entry (int32 -1 | int32 id | int32 byte length |
// UTF-8 bytes). Invalid UTF-8 is written as U+FFFD, as Java's encoder does.
func (r *Registry) add(dst []byte, s string) ([]byte, uint32) {
	if id, ok := r.ids[s]; ok {
		return dst, uint32(id)
	}
	if r.ids == nil {
		r.ids = make(map[string]int32)
	}
	id := int32(len(r.ids))
	r.ids[s] = id
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...), uint32(id)
}

// gen:part registryID

// id returns the id of a registered string.
func (r *Registry) id(s string) uint32 { return uint32(r.ids[s]) }

// gen:part appendBool

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// gen:part appendString

// appendString appends s as KDB writes strings: int32 byte length, bytes.
func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// gen:part checkLen

// checkLen fails for a string or array longer than an int32 length allows.
func checkLen(typ, field string, n int) error {
	if uint64(n) > math.MaxInt32 {
		return fmt.Errorf("%s field %s: length %d: %w", typ, field, n, ErrTooLong)
	}
	return nil
}
