package kieker

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/record"
)

// EncoderOptions configure an Encoder.
type EncoderOptions struct {
	// Registry assigns the string ids; nil means a new one (see Registry()).
	// Share one Registry between encoders writing to one log directory.
	Registry *Registry
	// Inline writes registry entries -1 | id | length | bytes before the
	// frame that first uses them (single-socket TCP). Otherwise new entries
	// are collected for the caller (NewEntries) to write to kieker.map or
	// a registry connection.
	Inline bool
}

// Encoder writes Kieker binary record frames. Class names and string values
// share one id space; ids are assigned in order of first use, the class
// name before the string fields, as Kieker 2.0 does. An Encoder is not safe
// for concurrent use.
type Encoder struct {
	reg     *Registry
	inline  bool
	pending []Entry
	ids     []int32
	classes map[*record.Type]int32 // class-name ids already registered
}

// NewEncoder returns an encoder configured by o.
func NewEncoder(o EncoderOptions) *Encoder {
	e := &Encoder{reg: o.Registry, inline: o.Inline}
	if e.reg == nil {
		e.reg = &Registry{}
	}
	return e
}

// Registry returns the encoder's string registry.
func (e *Encoder) Registry() *Registry { return e.reg }

// NewEntries returns the registry entries assigned since the last call, in
// id order, and forgets them. Inline encoders write their entries
// themselves and return none. The slice is reused by the next Append; copy
// it to keep it.
func (e *Encoder) NewEntries() []Entry {
	out := e.pending
	e.pending = e.pending[:0]
	return out
}

// Append appends r as one frame (in inline mode preceded by the registry
// entries of its new strings) and returns the extended slice. It fails,
// leaving dst and the registry unchanged, when r does not have one value
// per field of its type. An absent array (nil List) is written as an empty
// one; values are cut to their kind's width.
func (e *Encoder) Append(dst []byte, r *record.Record) ([]byte, error) {
	t := r.Type
	if t == nil {
		return dst, fmt.Errorf("kieker binary encoder: record without a type")
	}
	if len(r.Values) != len(t.Fields) {
		return dst, fmt.Errorf("kieker binary encoder: record of type %s has %d values where %d were expected", t.Name, len(r.Values), len(t.Fields))
	}
	// Pass 1: assign ids (class name first, then strings in field order).
	e.ids = e.ids[:0]
	if id, ok := e.classes[t]; ok {
		e.ids = append(e.ids, id)
	} else {
		dst = e.id(dst, t.Name)
		if e.classes == nil {
			e.classes = make(map[*record.Type]int32)
		}
		e.classes[t] = e.ids[0]
	}
	for i, f := range t.Fields {
		if f.Kind != record.String {
			continue
		}
		if !f.Array {
			dst = e.id(dst, r.Values[i].Str())
			continue
		}
		if l := r.Values[i].List(); l != nil {
			for _, it := range l.Items {
				dst = e.id(dst, it.Str())
			}
		}
	}
	// Pass 2: the frame.
	ids := e.ids
	dst = binary.BigEndian.AppendUint32(dst, uint32(ids[0]))
	ids = ids[1:]
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.LoggingTimestamp))
	for i, f := range t.Fields {
		v := r.Values[i]
		if !f.Array {
			if f.Kind == record.String {
				dst = binary.BigEndian.AppendUint32(dst, uint32(ids[0]))
				ids = ids[1:]
				continue
			}
			dst = appendBinary(dst, f.Kind, v)
			continue
		}
		var items []record.Value
		if l := v.List(); l != nil {
			items = l.Items
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(items)))
		for _, it := range items {
			if f.Kind == record.String {
				dst = binary.BigEndian.AppendUint32(dst, uint32(ids[0]))
				ids = ids[1:]
				continue
			}
			dst = appendBinary(dst, f.Kind, it)
		}
	}
	return dst, nil
}

// id looks s up, registering it (and, inline, writing its entry) when new.
func (e *Encoder) id(dst []byte, s string) []byte {
	id, isNew := e.reg.ID(s)
	e.ids = append(e.ids, id)
	if !isNew {
		return dst
	}
	if e.inline {
		return AppendRegistryEntry(dst, id, s, true)
	}
	e.pending = append(e.pending, Entry{ID: id, Value: s})
	return dst
}

// appendBinary appends one non-string value of kind k.
func appendBinary(dst []byte, k record.Kind, v record.Value) []byte {
	switch k {
	case record.Long:
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int()))
	case record.Int:
		return binary.BigEndian.AppendUint32(dst, uint32(v.Int()))
	case record.Double:
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(v.Double()))
	case record.Float:
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(v.Float()))
	case record.Short, record.Char:
		return binary.BigEndian.AppendUint16(dst, uint16(v.Int()))
	case record.Byte:
		return append(dst, byte(v.Int()))
	case record.Bool:
		if v.Bool() {
			return append(dst, 1)
		}
		return append(dst, 0)
	}
	return dst
}

// AppendRegistryEntry appends a registry entry for the string s with id:
// int32 -1 | int32 id | int32 length | bytes with marker (single-socket TCP),
// int32 id | int32 length | bytes without (the registry connection of the
// dual-socket writers). length is the byte length of the UTF-8 text
// (Kieker's Java writers put the UTF-16 char count there, a bug we do not
// reproduce). Invalid UTF-8 in s is written as U+FFFD, as Java's encoder
// replaces what it cannot encode: the decoders reject invalid entries.
func AppendRegistryEntry(dst []byte, id int32, s string, marker bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if marker {
		dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}
