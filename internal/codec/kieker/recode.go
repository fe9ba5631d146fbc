package kieker

import (
	"encoding/binary"
	"fmt"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Recoder writes records that a Decoder kept the frames of
// (Options.KeepFrames) into a binary Kieker log by copying each frame and
// replacing the stream's class and string ids with ids of the log's
// Registry: Kieker's log and its TCP streams share the frame layout, so a
// record just decoded need not be encoded value by value again. It
// shares the Registry with the log's Encoder, so both assign ids in one
// space (class name first, then the strings in field order, as the Encoder
// does).
//
// A stream id is looked up in a table per source (record.Frames.Source):
// one slice index per string field once the id was seen; a new one takes
// its string from the record's decoded value. Ids never change meaning
// within a source (a Kieker registry cannot redefine an id), and sources
// are never reused. Tables are kept for the most recent sources only
// (recodeSources), each for ids below recodeMaxID; a record outside them
// is left to the Encoder (Append reports false), as is a record of a type
// with array fields.
//
// A Recoder is not safe for concurrent use.
type Recoder struct {
	reg     *Registry
	pending []Entry
	types   map[*record.Type]*recodeType
	last    [2]*recodeType // the last types seen: Before and After events alternate
	sources [recodeSources]recodeSource
	next    int // the slot of sources to take next
}

// recodeType is what the Recoder knows of one record type.
type recodeType struct {
	typ     *record.Type
	class   int32 // the class name's id in the Registry
	size    int   // frame size; -1: the type has array fields (not recoded)
	strs    []int // offsets of the string ids in the frame
	strVals []int // their fields' indexes
	bools   []int // offsets of the booleans: 1 is true, any other byte false
}

type recodeSource struct {
	id  uint64
	ids []int32 // stream id → Registry id + 1; 0: not seen yet
}

const (
	recodeSources = 16
	recodeMaxID   = 1 << 18
)

// NewRecoder returns a Recoder assigning ids from reg (the Registry of the
// log's Encoder).
func NewRecoder(reg *Registry) *Recoder {
	return &Recoder{reg: reg, types: make(map[*record.Type]*recodeType)}
}

// NewEntries returns the registry entries assigned since the last call, in
// id order, and forgets them. The slice is reused by the next Append.
func (c *Recoder) NewEntries() []Entry {
	out := c.pending
	c.pending = c.pending[:0]
	return out
}

// Append appends the frames of recs, whose frames are f's from index
// base on (f.Valid holds for f's records), with the log's ids, and returns
// the extended slice and how many records it appended: all of them, or
// those before the first that it leaves to the caller's Encoder (a type
// with array fields, a frame that does not fit its type, an id beyond the
// tables' range).
func (c *Recoder) Append(dst []byte, recs []record.Record, f *record.Frames, base int) ([]byte, int) {
	if f.Source == 0 {
		return dst, 0
	}
	s := c.source(f.Source)
	start := 0
	if base > 0 {
		start = f.Ends[base-1]
	}
	for i := range recs {
		r := &recs[i]
		end := f.Ends[base+i]
		frame := f.Data[start:end:end]
		t := c.typeOf(r.Type)
		if t.size < 0 || len(frame) != t.size || len(t.strs) > maxRecodeStrings {
			return dst, i
		}
		// Look every id up first, so that nothing is appended on failure.
		var ids [maxRecodeStrings]int32
		for k, at := range t.strs {
			sid := binary.BigEndian.Uint32(frame[at:])
			if int(sid) < len(s.ids) {
				if id := s.ids[sid]; id != 0 {
					ids[k] = id - 1
					continue
				}
			} else if sid < recodeMaxID {
				s.ids = append(s.ids, make([]int32, int(sid)+1-len(s.ids))...)
			} else {
				return dst, i
			}
			id := c.id(r.Values[t.strVals[k]].Str())
			s.ids[sid] = id + 1
			ids[k] = id
		}
		at := len(dst)
		dst = append(dst, frame...)
		out := dst[at:]
		binary.BigEndian.PutUint32(out, uint32(t.class))
		for k, at := range t.strs {
			binary.BigEndian.PutUint32(out[at:], uint32(ids[k]))
		}
		for _, at := range t.bools {
			if out[at] != 1 { // as the decoder read it, as the Encoder writes it
				out[at] = 0
			}
		}
		start = end
	}
	return dst, len(recs)
}

// maxRecodeStrings is the most string fields of a type the Recoder
// copies.
const maxRecodeStrings = 8

// recodable reports whether the Recoder copies the frames of records of
// type t: no array fields, at most maxRecodeStrings string fields.
func recodable(t *record.Type) bool {
	strs := 0
	for _, f := range t.Fields {
		if f.Array {
			return false
		}
		if f.Kind == record.String {
			strs++
		}
	}
	return strs <= maxRecodeStrings
}

// AppendOnly appends the frames of a batch of frames only (f.Only: a
// Decoder with Options.FramesOnly made it), from index from to to, with
// the log's ids, taking the string of a stream id it has not seen from
// f.Strings. It returns the extended slice, or an error for a frame
// that does not fit its type or an id the view does not hold (the
// Decoder keeps only frames it can copy, so this means a broken batch).
func (c *Recoder) AppendOnly(dst []byte, f *record.Frames, from, to int) ([]byte, error) {
	s := c.source(f.Source)
	start := 0
	if from > 0 {
		start = f.Ends[from-1]
	}
	if from >= to {
		return dst, nil
	}
	// The frames in one copy, then each one's ids replaced in place.
	first, origin := len(dst), start
	dst = append(dst, f.Data[start:f.Ends[to-1]]...)
	ids := s.ids
	// The plans of the last two types, without a call per frame (Before
	// and After events alternate).
	var typ0, typ1 *record.Type
	var t0, t1 *recodeType
	for i := from; i < to; i++ {
		end := f.Ends[i]
		var t *recodeType
		switch typ := f.Types[i]; typ {
		case typ0:
			t = t0
		case typ1:
			t = t1
		default:
			t = c.typeOf(typ)
			typ1, t1, typ0, t0 = typ0, t0, typ, t
		}
		if t.size < 0 || end-start != t.size || len(t.strs) > maxRecodeStrings {
			return dst[:first], fmt.Errorf("frame %d of %s: %d bytes, not a frame the log can copy", i, f.Types[i].Name, end-start)
		}
		out := dst[first+start-origin : first+end-origin]
		binary.BigEndian.PutUint32(out, uint32(t.class))
		for _, at := range t.strs {
			sid := binary.BigEndian.Uint32(out[at:])
			if sid < uint32(len(ids)) {
				if id := ids[sid]; id != 0 {
					binary.BigEndian.PutUint32(out[at:], uint32(id-1))
					continue
				}
			}
			id, err := c.newID(s, f, sid)
			if err != nil {
				return dst[:first], fmt.Errorf("frame %d of %s: %w", i, f.Types[i].Name, err)
			}
			ids = s.ids
			binary.BigEndian.PutUint32(out[at:], uint32(id))
		}
		for _, at := range t.bools {
			if out[at] != 1 { // as the decoder reads it, as the Encoder writes it
				out[at] = 0
			}
		}
		start = end
	}
	return dst, nil
}

// newID maps stream id sid of source s, not seen before, to a Registry
// id, taking its string from the frames' view of the stream's registry.
func (c *Recoder) newID(s *recodeSource, f *record.Frames, sid uint32) (int32, error) {
	str, ok := f.Strings.String(int32(sid))
	if !ok || sid >= recodeMaxID {
		return 0, fmt.Errorf("string id %d not in the stream's registry", int32(sid))
	}
	if int(sid) >= len(s.ids) {
		s.ids = append(s.ids, make([]int32, int(sid)+1-len(s.ids))...)
	}
	id := c.id(str)
	s.ids[sid] = id + 1
	return id, nil
}

// typeOf returns the recoding plan of t, made on first use.
func (c *Recoder) typeOf(typ *record.Type) *recodeType {
	if t := c.last[0]; t != nil && t.typ == typ {
		return t
	}
	if t := c.last[1]; t != nil && t.typ == typ {
		c.last[0], c.last[1] = t, c.last[0]
		return t
	}
	t := c.types[typ]
	if t == nil {
		t = &recodeType{typ: typ, class: c.id(typ.Name), size: 12}
		for i, f := range typ.Fields {
			if f.Array {
				t.size = -1
				break
			}
			switch f.Kind {
			case record.String:
				t.strs = append(t.strs, t.size)
				t.strVals = append(t.strVals, i)
			case record.Bool:
				t.bools = append(t.bools, t.size)
			}
			t.size += binarySize(f.Kind)
		}
		c.types[typ] = t
	}
	c.last[0], c.last[1] = t, c.last[0]
	return t
}

// source returns the id table of src, taking the oldest slot for a new
// one.
func (c *Recoder) source(src uint64) *recodeSource {
	for i := range c.sources {
		if c.sources[i].id == src {
			return &c.sources[i]
		}
	}
	s := &c.sources[c.next]
	c.next = (c.next + 1) % recodeSources
	s.id, s.ids = src, s.ids[:0]
	return s
}

// id returns the Registry id of s, noting a new entry.
func (c *Recoder) id(s string) int32 {
	id, isNew := c.reg.ID(s)
	if isNew {
		c.pending = append(c.pending, Entry{ID: id, Value: s})
	}
	return id
}
