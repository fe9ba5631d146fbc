package zico

import (
	"strconv"

	"github.com/tracebridge/tracebridge/internal/codec/fressian"
)

// Default limits of a Decoder (see Limits).
const (
	DefaultMaxRecords = 1 << 18
	DefaultMaxItems   = 1 << 19
	DefaultMaxDepth   = 1024
	DefaultMaxAttrs   = 1 << 12
	DefaultMaxStack   = 1 << 13
)

// Limits bound what a Decoder accepts in one payload; zero fields take
// the defaults.
type Limits struct {
	// Fressian are the limits of the Fressian layer (string length, list
	// length, nesting of values, caches).
	Fressian fressian.Limits
	// MaxRecords bounds the trace records of one payload, at all levels.
	MaxRecords int
	// MaxItems bounds the records, attributes and stack elements of one
	// payload together. With MaxRecords it bounds the memory a payload
	// decodes into: about 150 bytes a record, 100 an attribute or stack
	// element.
	MaxItems int
	// MaxDepth bounds the nesting of records, of exception causes and of
	// tagged values.
	MaxDepth int
	// MaxAttrs bounds the attributes of one record.
	MaxAttrs int
	// MaxStack bounds the stack elements of one exception.
	MaxStack int
}

func (l Limits) withDefaults() Limits {
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultMaxRecords
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultMaxItems
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxAttrs <= 0 {
		l.MaxAttrs = DefaultMaxAttrs
	}
	if l.MaxStack <= 0 {
		l.MaxStack = DefaultMaxStack
	}
	return l
}

// The kinds of object errors, as in package fressian: every error of
// DecodeData (except visit's own) is a *fressian.Error of one of them.
var (
	// ErrFressianTruncated: the payload ends inside an object. zico keeps
	// the objects before it and answers OK (ZICO.md §2).
	ErrFressianTruncated = fressian.ErrTruncated
	// ErrMalformed, ErrType: the payload is not what zorka writes; zico
	// closes the connection without a reply.
	ErrMalformed = fressian.ErrMalformed
	ErrType      = fressian.ErrType
	// ErrLimit: a limit was exceeded (also ErrSymbolLimit's).
	ErrLimit = fressian.ErrLimit
)

// Stats count what the last DecodeData call decoded.
type Stats struct {
	Objects, Symbols, Traces, Records, Unknown int
	// Dropped counts traces decoded but not visited: a stack trace with
	// a null element makes zico's processing of the record fail, and it
	// skips the record.
	Dropped int
}

// Decoder decodes the objects of zorka's payloads (see the package
// comment). It reuses its memory from payload to payload: the objects it
// yields are valid until the next DecodeData call; the strings in them
// may be kept.
//
// A Decoder is not safe for concurrent use: one per connection.
type Decoder struct {
	lim  Limits
	f    *fressian.Decoder
	syms *SymbolMap

	records    slab[TraceRecord]
	attrs      slab[Attr]
	stack      slab[StackElement]
	exceptions slab[Exception]
	markers    slab[TraceMarker]
	values     slab[Value]
	symbols    slab[Symbol]
	traces     slab[Trace]
	stackTmp   []StackElement

	stats      Stats
	items      int  // records, attributes and stack elements of the payload
	unresolved int  // ids without a symbol in the current trace
	drop       bool // the current trace is dropped
	seen       map[int32]int
}

// NewDecoder returns a Decoder with the limits.
func NewDecoder(lim Limits) *Decoder {
	return &Decoder{
		lim: lim.withDefaults(),
		f:   fressian.NewDecoder(fressian.Options{Limits: lim.Fressian, FieldCount: FieldCount, Tags: tags}),
	}
}

// tags are zorka's struct tags, interned by the Fressian decoder.
var tags = func() []string {
	var t []string
	for tag := range fieldCounts {
		t = append(t, tag)
	}
	return t
}()

// Stats returns the counts of the last DecodeData call.
func (d *Decoder) Stats() Stats { return d.stats }

// DecodeData decodes the objects of a payload in order and calls visit
// for each, as zico's server processes them: a Symbol is put into syms
// before visit sees it, and the ids of every later object are resolved
// through syms (syms may be nil: names stay "", nothing is registered).
//
// It returns the first error of visit unchanged. Otherwise it returns nil
// when the payload ended after a complete object, an error matching
// ErrFressianTruncated when it ended inside one (the objects before it
// were visited: zico keeps them and replies OK), and any other error
// (ErrMalformed, ErrType, ErrLimit) for a payload zico refuses by closing
// the connection: then zico processes none of its objects, so callers
// that commit must not commit the objects visited before the error.
// Errors name the payload offset and the reason.
func (d *Decoder) DecodeData(payload []byte, syms *SymbolMap, visit func(Object) error) error {
	d.reset(syms)
	d.f.Reset(payload)
	for d.f.More() {
		obj := d.object()
		if err := d.f.Err(); err != nil {
			return err
		}
		d.stats.Objects++
		if obj == nil {
			continue
		}
		if err := visit(obj); err != nil {
			return err
		}
	}
	return nil
}

func (d *Decoder) reset(syms *SymbolMap) {
	d.syms = syms
	d.records.reset()
	d.attrs.reset()
	d.stack.reset()
	d.exceptions.reset()
	d.markers.reset()
	d.values.reset()
	d.symbols.reset()
	d.traces.reset()
	d.stats = Stats{}
	d.items = 0
}

// item counts one record, attribute or stack element against MaxItems.
func (d *Decoder) item(at int) bool {
	if d.items++; d.items > d.lim.MaxItems {
		d.limit(at, "more than "+strconv.Itoa(d.lim.MaxItems)+" records, attributes and stack elements in a payload")
		return false
	}
	return true
}

// object decodes one top-level object; nil for a dropped trace.
func (d *Decoder) object() Object {
	f := d.f
	k := f.Peek()
	if k != fressian.KindStruct {
		f.Skip()
		d.stats.Unknown++
		return &Unknown{Kind: k}
	}
	at := f.Offset()
	tag, n := f.ReadStruct()
	switch tag {
	case TagSymbol:
		s := d.symbols.one()
		s.ID = int32(f.ReadInt())
		name, null := f.ReadString()
		s.Name = name
		if d.syms != nil && !null && f.Err() == nil {
			if err := d.syms.Put(s.ID, name); err != nil {
				f.Fail(at, fressian.ErrLimit, err.Error())
			}
		}
		d.stats.Symbols++
		return s
	case TagRecord:
		d.unresolved, d.drop = 0, false
		before := d.stats.Records
		r := d.records.one()
		d.record(r, 1)
		if d.drop {
			d.stats.Dropped++
			return nil
		}
		t := d.traces.one()
		*t = Trace{Root: r, Records: d.stats.Records - before, Unresolved: d.unresolved}
		d.stats.Traces++
		return t
	case TagMarker:
		m := d.markers.one()
		d.marker(m)
		return m
	case TagHello:
		h := &HelloRequest{Time: f.ReadInt()}
		h.Hostname, _ = f.ReadString()
		h.Auth, _ = f.ReadString()
		return h
	}
	for range n {
		f.Skip()
	}
	d.stats.Unknown++
	return &Unknown{Kind: k, Tag: tag}
}

// name resolves a symbol id.
func (d *Decoder) name(id int32) string {
	if d.syms == nil {
		return ""
	}
	s, ok := d.syms.Lookup(id)
	if !ok {
		d.unresolved++
	}
	return s
}

// expect reads a struct that must have the tag (or be null, if nullable)
// and reports whether it is there, its fields to be read by the caller.
// Anything else is read whole and then reported as ErrType, as Java's
// handlers cast what readObject returned.
func (d *Decoder) expect(tag, what string) bool {
	f := d.f
	at := f.Offset()
	if f.Peek() != fressian.KindStruct {
		k := f.Peek()
		f.Skip()
		f.Fail(at, fressian.ErrType, what+": expected "+shortTag(tag)+", got "+k.String())
		return false
	}
	got, n := f.ReadStruct()
	if got != tag {
		for range n {
			f.Skip()
		}
		f.Fail(at, fressian.ErrType, what+": expected "+shortTag(tag)+", got struct "+got)
		return false
	}
	return f.Err() == nil
}

func shortTag(tag string) string {
	const prefix = "com.jitlogic.zorka."
	if len(tag) > len(prefix) && tag[:len(prefix)] == prefix {
		return tag[len(prefix):]
	}
	return tag
}

func (d *Decoder) limit(at int, msg string) { d.f.Fail(at, fressian.ErrLimit, msg) }

// record decodes the fields of a TraceRecord_v1 (its head is read).
func (d *Decoder) record(r *TraceRecord, depth int) {
	f := d.f
	at := f.Offset()
	if depth > d.lim.MaxDepth {
		d.limit(at, "trace records nested deeper than "+strconv.Itoa(d.lim.MaxDepth))
		return
	}
	if d.stats.Records++; d.stats.Records > d.lim.MaxRecords {
		d.limit(at, "more than "+strconv.Itoa(d.lim.MaxRecords)+" trace records in a payload")
		return
	}
	if !d.item(at) {
		return
	}
	r.ClassID = int32(f.ReadInt())
	r.MethodID = int32(f.ReadInt())
	r.SignatureID = int32(f.ReadInt())
	r.Flags = int32(f.ReadInt())
	r.Time = f.ReadInt()
	r.Calls = f.ReadInt()
	r.Errors = f.ReadInt()
	r.Class, r.Method, r.Signature = d.name(r.ClassID), d.name(r.MethodID), d.name(r.SignatureID)

	// The marker is read whatever the flags say (zorka writes it only
	// with FlagTraceBegin).
	if !f.ReadNull() && d.expect(TagMarker, "record marker") {
		r.Marker = d.markers.one()
		d.marker(r.Marker)
	}
	// The exception may be any object; only SymbolicException_v1 counts.
	if !f.ReadNull() {
		if f.Peek() == fressian.KindStruct {
			tag, n := f.ReadStruct()
			if tag == TagException {
				r.Exception = d.exception(depth)
			} else {
				for range n {
					f.Skip()
				}
			}
		} else {
			f.Skip()
		}
	}
	if !f.ReadNull() {
		d.attributes(r, depth)
	}
	if !f.ReadNull() {
		d.children(r, depth)
	}
}

func (d *Decoder) marker(m *TraceMarker) {
	f := d.f
	m.TraceID = int32(f.ReadInt())
	m.Clock = f.ReadInt()
	m.MinimumTime = f.ReadInt()
	m.Flags = int32(f.ReadInt())
	m.TraceType = d.name(m.TraceID)
}

// attributes decodes the attribute map of r: int keys, any values. A key
// that is not an int fails after the whole map is read (Java casts the
// keys after reading the map). A repeated key keeps its first place and
// takes the last value, as a Java map does.
func (d *Decoder) attributes(r *TraceRecord, depth int) {
	f := d.f
	at := f.Offset()
	if f.Peek() != fressian.KindMap {
		k := f.Peek()
		f.Skip()
		f.Fail(at, fressian.ErrType, "record attributes: expected map, got "+k.String())
		return
	}
	m := f.ReadMap()
	n := m.Len() / 2
	if m.Len() < 0 {
		n = 8
	}
	n = min(n, d.lim.MaxAttrs, f.Remaining()/2+1)
	attrs := d.attrs.alloc(n)[:0]
	badKey := -1
	for i := 0; m.Next(); i++ {
		keyAt := f.Offset()
		var key int64
		if k := f.Peek(); k == fressian.KindInt {
			key = f.ReadInt()
		} else {
			f.Skip()
			if badKey < 0 {
				badKey = keyAt
			}
		}
		if !m.Next() {
			if f.Err() == nil {
				f.Fail(f.Offset(), fressian.ErrMalformed, "map with an odd number of items")
			}
			return
		}
		var v Value
		d.value(&v, depth)
		if f.Err() != nil || badKey >= 0 {
			continue
		}
		id := int32(key)
		if j, dup := d.lookupAttr(attrs, id); dup {
			attrs[j].Value = v
			continue
		}
		if len(attrs) == d.lim.MaxAttrs {
			d.limit(keyAt, "more than "+strconv.Itoa(d.lim.MaxAttrs)+" attributes in a record")
			return
		}
		if !d.item(keyAt) {
			return
		}
		if len(attrs) == cap(attrs) { // an uncounted map, or more than the slab run
			attrs = append(d.attrs.alloc(max(2*cap(attrs), 8))[:0], attrs...)
		}
		attrs = append(attrs, Attr{KeyID: id, Key: d.name(id), Value: v})
	}
	if badKey >= 0 && f.Err() == nil {
		f.Fail(badKey, fressian.ErrType, "record attribute key: expected int")
	}
	r.Attrs = attrs
}

// lookupAttr finds the attribute with the key id among attrs.
func (d *Decoder) lookupAttr(attrs []Attr, id int32) (int, bool) {
	if len(attrs) <= 16 {
		for j := range attrs {
			if attrs[j].KeyID == id {
				return j, true
			}
		}
		return 0, false
	}
	if len(attrs) == 17 || d.seen == nil { // switch to an index
		if d.seen == nil {
			d.seen = make(map[int32]int)
		}
		clear(d.seen)
		for j := range attrs[:len(attrs)-1] {
			d.seen[attrs[j].KeyID] = j
		}
	}
	d.seen[attrs[len(attrs)-1].KeyID] = len(attrs) - 1
	j, ok := d.seen[id]
	return j, ok
}

// value decodes an attribute value.
func (d *Decoder) value(v *Value, depth int) {
	f := d.f
	switch k := f.Peek(); k {
	case fressian.KindNull:
		f.ReadNull()
		v.Kind = KindNull
	case fressian.KindBool:
		v.Kind, v.Int = KindBool, 0
		if f.ReadBool() {
			v.Int = 1
		}
	case fressian.KindInt:
		v.Kind, v.Int = KindInt, f.ReadInt()
	case fressian.KindFloat:
		v.Kind, v.Float = KindFloat, float64(f.ReadFloat())
	case fressian.KindDouble:
		v.Kind, v.Float = KindDouble, f.ReadDouble()
	case fressian.KindString:
		v.Kind = KindString
		v.Str, _ = f.ReadString()
	case fressian.KindStruct:
		at := f.Offset()
		tag, n := f.ReadStruct()
		if tag == TagTagged {
			if depth > d.lim.MaxDepth {
				d.limit(at, "tagged values nested deeper than "+strconv.Itoa(d.lim.MaxDepth))
				return
			}
			v.Kind = KindTagged
			v.Int = int64(int32(f.ReadInt()))
			v.Str = d.name(int32(v.Int))
			v.Elem = d.values.one()
			d.value(v.Elem, depth+1)
			return
		}
		other := fressian.Value{Kind: fressian.KindStruct, Tag: tag, Items: make([]fressian.Value, 0, n)}
		for i := 0; i < n && f.Err() == nil; i++ {
			other.Items = append(other.Items, f.ReadValue())
		}
		v.Kind, v.Other = KindOther, &other
	default:
		other := f.ReadValue()
		v.Kind, v.Other = KindOther, &other
	}
}

// exception decodes the fields of a SymbolicException_v1 (its head is
// read).
func (d *Decoder) exception(depth int) *Exception {
	f := d.f
	at := f.Offset()
	if depth > d.lim.MaxDepth {
		d.limit(at, "exception causes nested deeper than "+strconv.Itoa(d.lim.MaxDepth))
		return nil
	}
	e := d.exceptions.one()
	e.ClassID = int32(f.ReadInt())
	e.Class = d.name(e.ClassID)
	e.Message, _ = f.ReadString()

	// The stack: a list (null fails in Java's toArray) of stack
	// elements, checked after the whole list is read.
	at = f.Offset()
	switch k := f.Peek(); {
	case k == fressian.KindNull:
		f.ReadNull()
		f.Fail(at, fressian.ErrType, "exception stack: null")
	case k != fressian.KindList:
		f.Skip()
		f.Fail(at, fressian.ErrType, "exception stack: expected list, got "+k.String())
	default:
		e.Stack = d.stackTrace()
	}
	if !f.ReadNull() && d.expect(TagException, "exception cause") {
		e.Cause = d.exception(depth + 1)
	}
	return e
}

func (d *Decoder) stackTrace() []StackElement {
	f := d.f
	l := f.ReadList()
	tmp := d.stackTmp[:0]
	bad := -1
	for l.Next() {
		at := f.Offset()
		if f.ReadNull() {
			// Java keeps the null and fails when zico processes the
			// record: the record is skipped, the payload goes on.
			d.drop = true
			continue
		}
		if !d.expectLater(TagStackElement, &bad) {
			continue
		}
		if len(tmp) == d.lim.MaxStack {
			d.limit(at, "more than "+strconv.Itoa(d.lim.MaxStack)+" stack elements in an exception")
			return nil
		}
		if !d.item(at) {
			return nil
		}
		var s StackElement
		s.ClassID = int32(f.ReadInt())
		s.MethodID = int32(f.ReadInt())
		s.FileID = int32(f.ReadInt())
		s.Line = int32(f.ReadInt())
		s.Class, s.Method, s.File = d.name(s.ClassID), d.name(s.MethodID), d.name(s.FileID)
		tmp = append(tmp, s)
	}
	d.stackTmp = tmp
	if bad >= 0 {
		f.Fail(bad, fressian.ErrType, "exception stack element: expected "+shortTag(TagStackElement))
	}
	if f.Err() != nil {
		return nil
	}
	out := d.stack.alloc(len(tmp))
	copy(out, tmp)
	return out
}

// expectLater reads the next item of a list whose items must be structs
// with the tag. A wrong item is read whole and its offset noted in *bad
// (the first one), to be reported after the list, as Java casts the items
// of a list it has read. It reports whether the item's fields follow.
func (d *Decoder) expectLater(tag string, bad *int) bool {
	f := d.f
	at := f.Offset()
	if f.Peek() == fressian.KindStruct {
		got, n := f.ReadStruct()
		if got == tag {
			return f.Err() == nil
		}
		for range n {
			f.Skip()
		}
	} else {
		f.Skip()
	}
	if *bad < 0 {
		*bad = at
	}
	return false
}

// children decodes the list of child records of r.
func (d *Decoder) children(r *TraceRecord, depth int) {
	f := d.f
	at := f.Offset()
	if k := f.Peek(); k != fressian.KindList {
		f.Skip()
		f.Fail(at, fressian.ErrType, "record children: expected list, got "+k.String())
		return
	}
	l := f.ReadList()
	bad := -1
	if n := l.Len(); n >= 0 {
		// A counted list: its records go straight into one run. A list
		// longer than the bytes left cannot be complete (every item
		// takes a byte), so the run is never sized beyond them.
		kids := d.records.alloc(min(n, f.Remaining()))
		i := 0
		for l.Next() {
			if i == len(kids) {
				f.Fail(f.Offset(), fressian.ErrTruncated, "payload ends inside a list")
				return
			}
			if d.childHead(&bad) {
				d.record(&kids[i], depth+1)
				i++
			}
		}
		r.Children = kids[:i]
	} else {
		var kids []TraceRecord
		for l.Next() {
			if d.childHead(&bad) {
				var c TraceRecord
				d.record(&c, depth+1)
				kids = append(kids, c)
			}
		}
		r.Children = d.records.alloc(len(kids))
		copy(r.Children, kids)
	}
	if bad >= 0 {
		f.Fail(bad, fressian.ErrType, "record child: expected "+shortTag(TagRecord))
	}
}

// childHead reads the head of a child record; a null or another value is
// read and noted as a bad item (Java fails on it after the list is read).
func (d *Decoder) childHead(bad *int) bool {
	if at := d.f.Offset(); d.f.ReadNull() {
		if *bad < 0 {
			*bad = at
		}
		return false
	}
	return d.expectLater(TagRecord, bad)
}
