package trace

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strconv"
	"unsafe"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Pending spans.
//
// A span record waits for the rest of its trace (the window, 2 s by
// default) as bytes, not as a Span: its fields are appended to its
// trace's buffer (family.buf), which holds no pointers, so the garbage
// collector neither scans it nor counts the spans' strings and slices as
// objects; the trace's Spans are made once, when it is complete
// (pendingSpans). A string is written as a reference to a dictionary
// (spanDict) when it repeats (keys, names, services, routes: what the
// decoders intern), else inline.
//
// A pending span, in the order written (strref: uvarint x; x even: the
// string of id x/2 in the trace's dictionary, 0 the empty one; x odd:
// x/2 bytes follow, the string itself):
//
//	spanId u64, parentSpanId u64, start u64 (little-endian)
//	end−start uvarint (zig-zag), kind byte, status byte
//	name, service, host, statusMessage, component, thread, process: strref each
//	not lean: resource, scope: uvarint each (1 + index in the trace's tables, 0: none)
//	not lean: attributes: uvarint n, n × (key strref, type byte, value strref)
//	not lean: events: uvarint n, n × (name strref, time varint, attributes JSON strref)
//	not lean: links: uvarint n, n × (trace id, span id, trace state, attributes JSON: strref each)

// spanDict holds strings the pending spans of many traces refer to by
// id. It only grows; when full, the assembler begins another one for the
// traces begun after it, and the old one lives as long as a trace that
// refers to it.
type spanDict struct {
	strs []string
	// table holds the ids of strs (low 32 bits; 0: empty) with the high
	// 32 bits of their hash (dictSeed) above, open-addressed by the hash:
	// the hash a lookup computes also serves the sketch of strings seen
	// once, and a slot of another string is passed over without
	// comparing bytes. Its length is a power of 2, at least twice
	// len(strs).
	table []uint64
	bytes int
}

// Limits of a spanDict.
const (
	dictMaxStrings = 1 << 16
	dictMaxBytes   = 4 << 20
)

func newSpanDict() *spanDict {
	return &spanDict{strs: []string{""}, table: make([]uint64, 256)}
}

// lookup returns the id of s (not ""), of hash h (0: not in d), and the
// slot it has or would take.
func (d *spanDict) lookup(s string, h uint64) (uint32, *uint64) {
	mask := uint64(len(d.table) - 1)
	fp := h >> 32 << 32
	for i := h & mask; ; i = (i + 1) & mask {
		x := d.table[i]
		if x == 0 {
			return 0, &d.table[i]
		}
		if x&^(1<<32-1) == fp && d.strs[uint32(x)] == s {
			return uint32(x), &d.table[i]
		}
	}
}

// add adds s (not in d) of hash h, at slot (lookup's), and returns its
// id.
func (d *spanDict) add(s string, h uint64, slot *uint64) uint32 {
	id := uint32(len(d.strs))
	d.strs = append(d.strs, s)
	*slot = h>>32<<32 | uint64(id)
	d.bytes += len(s) + 32
	if 2*len(d.strs) > len(d.table) {
		d.table = make([]uint64, 2*len(d.table))
		mask := uint64(len(d.table) - 1)
		for id, s := range d.strs[1:] {
			h := maphash.String(dictSeed, s)
			i := h & mask
			for d.table[i] != 0 {
				i = (i + 1) & mask
			}
			d.table[i] = h>>32<<32 | uint64(id+1)
		}
	}
	return id
}

func (d *spanDict) full() bool { return len(d.strs) >= dictMaxStrings || d.bytes >= dictMaxBytes }

// spanCodec is the assembler's state for pending spans: the dictionary
// new traces use, a cache of the strings last found in a dictionary by
// their address (a decoder's interned strings repeat with their address,
// so most lookups need neither hashing nor comparing bytes), and a
// sketch of the hashes of strings seen once (a string enters the
// dictionary when it is seen a second time, so ids in paths, which never
// repeat, stay inline and do not fill it).
type spanCodec struct {
	dict  *spanDict
	cache []dictSlot
	seen  []uint32
	// perSpan is the recent average of bytes per pending span (×16), for
	// the capacity of a new trace's buffer.
	perSpan int
	// inline counts the bytes of the strings written inline.
	inline int
}

type dictSlot struct {
	s  string // kept, so its address is not reused while the slot names it
	d  *spanDict
	id uint32
}

const (
	dictCacheBits  = 12
	dictCacheSlots = 1 << dictCacheBits
	dictSeenSlots  = 1 << 17
)

var dictSeed = maphash.MakeSeed()

func (c *spanCodec) init() {
	if c.dict == nil {
		c.dict = newSpanDict()
		c.cache = make([]dictSlot, dictCacheSlots)
		c.seen = make([]uint32, dictSeenSlots)
		c.perSpan = 128 * 16
	}
}

// str appends s as a strref of dictionary d.
func (c *spanCodec) str(dst []byte, d *spanDict, s string) []byte {
	if s == "" {
		return append(dst, 0)
	}
	p := unsafe.StringData(s)
	slot := &c.cache[((uint64(uintptr(unsafe.Pointer(p)))>>3^uint64(len(s)))*0x9e3779b97f4a7c15)>>(64-dictCacheBits)]
	if slot.d == d && unsafe.StringData(slot.s) == p && len(slot.s) == len(s) {
		return binary.AppendUvarint(dst, uint64(slot.id)<<1)
	}
	h := maphash.String(dictSeed, s)
	id, at := d.lookup(s, h)
	ok := id != 0
	if !ok && d == c.dict && len(s) <= 1024 {
		seen := &c.seen[h&(dictSeenSlots-1)]
		if fp := uint32(h>>32) | 1; *seen == fp {
			id, ok = d.add(s, h, at), true
			if d.full() {
				c.dict = newSpanDict()
				clear(c.cache) // slots naming older dictionaries would keep them
			}
		} else {
			*seen = fp
		}
	}
	if ok {
		*slot = dictSlot{s: s, d: d, id: id}
		return binary.AppendUvarint(dst, uint64(id)<<1)
	}
	dst = binary.AppendUvarint(dst, uint64(len(s))<<1|1)
	c.inline += len(s)
	return append(dst, s...)
}

// strItem appends record value v (a string) as a strref.
func (c *spanCodec) strItem(dst []byte, d *spanDict, v record.Value) []byte {
	return c.str(dst, d, v.Str())
}

// addSpan appends span record r (of SpanType's layout) to its trace,
// returning the trace.
func (a *Assembler) addSpan(r *record.Record, origin *record.Origin) *family {
	v := r.Values
	id := ID{Hi: uint64(v[SpanTraceIDHigh].Int()), Lo: uint64(v[SpanTraceIDLow].Int())}
	start, end := v[SpanStart].Int(), v[SpanEnd].Int()
	f := a.family(id, end)
	c := &a.codec
	c.init()
	if f.dict == nil {
		f.dict = c.dict
	}
	if f.buf == nil {
		f.buf = make([]byte, 0, max(min(int(a.spansPer/16+1)*c.perSpan/16, 64<<10), 256))
	}
	d := f.dict
	b := f.buf
	n0 := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(v[SpanSpanID].Int()))
	b = binary.LittleEndian.AppendUint64(b, uint64(v[SpanParentID].Int()))
	b = binary.LittleEndian.AppendUint64(b, uint64(start))
	b = binary.AppendVarint(b, end-start)
	b = append(b, byte(v[SpanKind].Int()), byte(v[SpanStatus].Int()))
	service := v[SpanService].Str()
	host := v[SpanHost].Str()
	if host == "" {
		host = service
	}
	if host == "" && origin != nil {
		host = origin.Host
	}
	comp := v[SpanComponent].Str()
	if comp == "" {
		comp = v[SpanScope].Str()
	}
	b = c.strItem(b, d, v[SpanName])
	b = c.str(b, d, service)
	b = c.str(b, d, host)
	b = c.strItem(b, d, v[SpanStatusMessage])
	b = c.str(b, d, comp)
	b = c.strItem(b, d, v[SpanThread])
	b = c.strItem(b, d, v[SpanProcess])
	if !a.opt.Lean {
		ri, si := a.originIndex(f, v)
		b = binary.AppendUvarint(b, uint64(ri))
		b = binary.AppendUvarint(b, uint64(si))
		var kv, ts []record.Value
		if l := v[SpanAttributes].List(); l != nil {
			kv = l.Items[:len(l.Items)&^1]
		}
		if l := v[SpanAttributeTypes].List(); l != nil {
			ts = l.Items
		}
		b = binary.AppendUvarint(b, uint64(len(kv)/2))
		f.nattrs += len(kv) / 2
		for i := 0; i+1 < len(kv); i += 2 {
			b = c.strItem(b, d, kv[i])
			b = append(b, byte(pairType(ts, i/2)))
			b = c.strItem(b, d, kv[i+1])
		}
		var evs, links []record.Value
		if l := v[SpanEvents].List(); l != nil {
			evs = l.Items[:len(l.Items)/3*3]
		}
		b = binary.AppendUvarint(b, uint64(len(evs)/3))
		for i := 0; i < len(evs); i += 3 {
			t, _ := strconv.ParseInt(evs[i+1].Str(), 10, 64)
			b = c.strItem(b, d, evs[i])
			b = binary.AppendVarint(b, t)
			b = c.strItem(b, d, evs[i+2])
		}
		if l := v[SpanLinks].List(); l != nil {
			links = l.Items[:len(l.Items)/4*4]
		}
		b = binary.AppendUvarint(b, uint64(len(links)/4))
		for _, it := range links {
			b = c.strItem(b, d, it)
		}
	}
	c.perSpan += len(b) - n0 - c.perSpan/16
	f.inline += c.inline
	c.inline = 0
	f.buf = b
	f.pending++
	return f
}

// batchOrigin is the origin of the last span record of a batch: the
// records of one resource share its lists (the decoders make them once),
// so the next record of the batch with the same lists and scope name has
// the same resource and scope, found without comparing their attributes.
type batchOrigin struct {
	on         bool // AddBatch is adding (a batch's lists live as long)
	res, types *record.List
	scope      string
	r          *Resource
	s          *Scope
}

// originIndex is the origin of span record values v as 1 + the indexes
// in f's tables (0: none), adding them when new.
func (a *Assembler) originIndex(f *family, v []record.Value) (int, int) {
	bo := &a.batchOrigin
	rl, tl, scope := v[SpanResource].List(), v[SpanResourceTypes].List(), v[SpanScope].Str()
	if bo.on && bo.res != nil && rl == bo.res && tl == bo.types && scope == bo.scope {
		ri, si := tableIndex(f.resources, bo.r), tableIndex(f.scopes, bo.s)
		if ri >= 0 && si >= 0 {
			return ri, si
		}
	}
	o := originOf(v)
	res, sc := f.origin(&o, &a.recent)
	if bo.on && rl != nil {
		*bo = batchOrigin{on: true, res: rl, types: tl, scope: scope, r: res, s: sc}
	}
	return max(tableIndex(f.resources, res), 0), max(tableIndex(f.scopes, sc), 0)
}

// tableIndex returns 1 + the index of x in table (0: x is nil; -1: not
// in it), the last entry first.
func tableIndex[T any](table []*T, x *T) int {
	if x == nil {
		return 0
	}
	for i := len(table) - 1; i >= 0; i-- {
		if table[i] == x {
			return i + 1
		}
	}
	return -1
}

// pendingReader reads a trace's pending spans. Its error sticks (a
// buffer the assembler wrote is never short; the check keeps a bug from
// reading past it).
type pendingReader struct {
	b   []byte
	off int
	// strs are the strings of the trace's dictionary (a spanDict's strs,
	// or what they were when the trace was packed).
	strs []string
	bad  bool
	// view: inline strings are read in place (strings of b, which is
	// never written again), else copied.
	view bool
	// inl holds the inline strings read (not view): they are copied into
	// it one after another, so that a trace's strings are one allocation (its
	// capacity is what they need; a string that does not fit is
	// allocated on its own).
	inl []byte
	// events, when set, is where spans' events and their attributes
	// are made (an Unpacker's memory, reused trace after trace); else
	// each span's are allocated.
	events *eventArena
}

// eventArena holds events and their attributes for spans read at once.
type eventArena struct {
	events []Event
	attrs  []Attr
}

func (r *pendingReader) u64() uint64 {
	if r.off+8 > len(r.b) {
		r.bad = true
		return 0
	}
	x := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return x
}

func (r *pendingReader) uvarint() uint64 {
	x, n := binary.Uvarint(r.b[min(r.off, len(r.b)):])
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.off += n
	return x
}

func (r *pendingReader) varint() int64 {
	x, n := binary.Varint(r.b[min(r.off, len(r.b)):])
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.off += n
	return x
}

func (r *pendingReader) byte() byte {
	if r.off >= len(r.b) {
		r.bad = true
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *pendingReader) str() string {
	x := r.uvarint()
	if x&1 == 0 {
		if x>>1 >= uint64(len(r.strs)) {
			r.bad = true
			return ""
		}
		return r.strs[x>>1]
	}
	n := int(x >> 1)
	if n < 0 || r.off+n > len(r.b) || r.off+n < r.off {
		r.bad = true
		return ""
	}
	var s string
	switch {
	case n == 0:
	case r.view:
		s = unsafe.String(&r.b[r.off], n) // never written again
	case n <= cap(r.inl)-len(r.inl):
		k := len(r.inl)
		r.inl = append(r.inl, r.b[r.off:r.off+n]...)
		s = unsafe.String(&r.inl[k], n) // never written again
	default:
		s = string(r.b[r.off : r.off+n])
	}
	r.off += n
	return s
}

// skipStr passes over a strref.
func (r *pendingReader) skipStr() {
	if x := r.uvarint(); x&1 != 0 {
		n := int(x >> 1)
		if n < 0 || r.off+n > len(r.b) || r.off+n < r.off {
			r.bad = true
			return
		}
		r.off += n
	}
}

// head reads the fixed fields a pending span begins with: its ids and
// times.
func (r *pendingReader) head() node {
	id, parent, start := SpanID(r.u64()), SpanID(r.u64()), int64(r.u64())
	return node{id: id, parent: parent, start: start, end: start + r.varint(), oi: -1, eoi: -1}
}

// skip passes over the rest of a pending span after its head, counting
// its attributes into *nattrs.
func (r *pendingReader) skip(lean bool, nattrs *int) {
	r.off += 2 // kind, status
	for range 7 {
		r.skipStr()
	}
	if lean {
		return
	}
	r.uvarint()
	r.uvarint()
	n := r.uvarint()
	*nattrs += int(min(n, uint64(len(r.b))))
	for i := uint64(0); i < n && !r.bad; i++ {
		r.skipStr()
		r.off++
		r.skipStr()
	}
	n = r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		r.skipStr()
		r.varint()
		r.skipStr()
	}
	n = r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		for range 4 { // trace id, span id, trace state, attributes
			r.skipStr()
		}
	}
	if r.off > len(r.b) {
		r.bad = true
	}
}

// span reads the pending span at r's offset into s. Its attributes are
// cut from *attrs (nil when they do not fit: r.bad is set); resources and
// scopes are the trace's tables.
func (r *pendingReader) span(s *Span, lean bool, resources []*Resource, scopes []*Scope, attrs *[]Attr) {
	*s = Span{OrderIndex: -1, EOI: -1, ESS: -1, Source: FromSpan}
	s.SpanID = SpanID(r.u64())
	s.ParentID = SpanID(r.u64())
	s.Start = int64(r.u64())
	s.End = s.Start + r.varint()
	s.Kind = Kind(r.byte())
	s.Status = Status(r.byte())
	s.Error = s.Status == StatusError
	s.Operation = r.str()
	s.Service = r.str()
	s.Host = r.str()
	s.StatusMessage = r.str()
	s.Component = r.str()
	s.Thread = r.str()
	s.Process = r.str()
	if lean {
		return
	}
	if ri := r.uvarint(); ri > 0 && ri <= uint64(len(resources)) {
		s.Resource = resources[ri-1]
	}
	if si := r.uvarint(); si > 0 && si <= uint64(len(scopes)) {
		s.Scope = scopes[si-1]
	}
	n := int(r.uvarint())
	if n > len(*attrs) || n < 0 {
		r.bad, n = true, 0
	}
	if n > 0 {
		as := (*attrs)[:n:n]
		*attrs = (*attrs)[n:]
		for i := range as {
			as[i].Key = r.str()
			as[i].Type = ValueType(r.byte())
			as[i].Value = r.str()
		}
		s.Attributes = as
	}
	if n := int(r.uvarint()); n > 0 && n <= len(r.b) {
		if a := r.events; a != nil {
			// Earlier spans' events stay where they are when the arena
			// grows: only those made after go to the new memory.
			a.events = slices.Grow(a.events, n)
			k := len(a.events)
			a.events = a.events[:k+n]
			s.Events = a.events[k : k+n : k+n]
		} else {
			s.Events = make([]Event, n)
		}
		for i := range s.Events {
			name, time, js := r.str(), r.varint(), r.str()
			var attrs []Attr
			if a := r.events; a != nil {
				k := len(a.attrs)
				if a.attrs = appendAttrsJSON(a.attrs, js); len(a.attrs) > k {
					attrs = a.attrs[k:len(a.attrs):len(a.attrs)]
				}
			} else {
				attrs = ParseAttrsJSON(js)
			}
			s.Events[i] = Event{Name: name, Time: time, Attributes: attrs}
		}
	}
	if n := int(r.uvarint()); n > 0 && n <= len(r.b) {
		for range n {
			tid, err1 := ParseID(r.str())
			sid, err2 := ParseSpanID(r.str())
			ts, as := r.str(), r.str()
			if err1 != nil || err2 != nil {
				continue
			}
			s.Links = append(s.Links, Link{TraceID: tid, SpanID: sid, TraceState: ts, Attributes: ParseAttrsJSON(as)})
		}
	}
}

// pendingSpans appends f's pending spans to out, in the order they came,
// and empties f's buffer.
func (a *Assembler) pendingSpans(f *family, out []Span) []Span {
	if f.pending == 0 {
		return out
	}
	out = slices.Grow(out, f.pending)
	attrs := make([]Attr, f.nattrs)
	r := pendingReader{b: f.buf, strs: f.dict.strs}
	if f.inline > 0 {
		r.inl = make([]byte, 0, f.inline)
	}
	for range f.pending {
		out = out[:len(out)+1] // made in place: a Span is large to copy
		r.span(&out[len(out)-1], a.opt.Lean, f.resources, f.scopes, &attrs)
		if r.bad {
			out = out[:len(out)-1]
			break
		}
	}
	f.buf, f.pending, f.nattrs, f.inline = nil, 0, 0, 0
	return out
}
