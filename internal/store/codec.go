package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// symbols is one host's dictionary: id 0 is the empty string.
type symbols struct {
	byName map[string]uint32
	names  []string
}

func newSymbols() *symbols {
	return &symbols{byName: map[string]uint32{"": 0}, names: []string{""}}
}

// id returns the id of s, adding it (and reporting it new) when unknown.
func (d *symbols) id(s string) (uint32, bool) {
	if id, ok := d.byName[s]; ok {
		return id, false
	}
	id := uint32(len(d.names))
	s = strings.Clone(s) // (a packed trace's strings point into its bytes)
	d.names = append(d.names, s)
	d.byName[s] = id
	return id, true
}

func (d *symbols) name(id uint64) (string, bool) {
	if id >= uint64(len(d.names)) {
		return "", false
	}
	return d.names[id], true
}

// bodyVersion is the version of the trace body that encodeTrace writes,
// its first byte; decodeTrace reads versions 1 to 3 (docs/STORE.md).
// Version 3 stores a span's Kieker position only when it has one (flag
// kiekerFlag): an OpenTelemetry or zorka span paid up to 13 bytes for
// it, 9 or 10 of them the trace id's random low bits.
const bodyVersion = 3

// kiekerFlag (in a span's flags, version 3) says that its Kieker
// position (orderIndex, eoi, ess, Kieker trace id) follows; without it
// the span has none (noKieker).
const kiekerFlag = 128

// noKieker reports whether s has no Kieker position (as a span record
// makes it: orderIndex, eoi and ess -1, no Kieker trace id).
func noKieker(s *trace.Span) bool {
	return s.OrderIndex == -1 && s.EOI == -1 && s.ESS == -1 && s.KiekerTrace == 0
}

// Limits of the trace encoding, checked when decoding.
const (
	maxSpansPerTrace = 1 << 24
	maxStringLen     = 16 << 20
	maxListLen       = 1 << 20
)

// errCorrupt is wrapped by decoding errors.
var errCorrupt = errors.New("corrupt trace data")

// encoder appends traces to a block payload, defining symbols as it goes.
type encoder struct {
	syms    *symbols
	newSyms []string // defined since the block began
	tmp     []byte
	// The tables of the trace being encoded (scratch).
	res    []*trace.Resource
	scopes []*trace.Scope
	resAt  map[*trace.Resource]int // beyond tableScan entries
	scAt   map[*trace.Scope]int
	// recent are symbols looked up lately, by their bytes' address: the
	// strings of a bridge's spans are interned, so the same operation
	// mostly comes with the same bytes and is found without hashing it.
	recent [512]symCached
}

type symCached struct {
	s  string
	id uint32
}

// tableScan bounds the entries of a trace's resource or scope table
// searched in order; a longer table (a trace of many resources) is
// searched through a map.
const tableScan = 16

// tables gathers the resources and scopes of t's spans into e.res and
// e.scopes: t's tables first, then any entry a span points at that they
// lack.
func (e *encoder) tables(t *trace.Trace) {
	clear(e.res)
	clear(e.scopes)
	e.res, e.scopes = e.res[:0], e.scopes[:0]
	clear(e.resAt)
	clear(e.scAt)
	for _, r := range t.Resources {
		e.resIndex(r)
	}
	for _, c := range t.Scopes {
		e.scopeIndex(c)
	}
	for i := range t.Spans {
		e.resIndex(t.Spans[i].Resource)
		e.scopeIndex(t.Spans[i].Scope)
	}
}

// resIndex returns 1 + the index of r in e.res, adding it when new (0:
// nil).
func (e *encoder) resIndex(r *trace.Resource) int { return tableIndex(&e.res, &e.resAt, r) }

// scopeIndex is resIndex for scopes.
func (e *encoder) scopeIndex(c *trace.Scope) int { return tableIndex(&e.scopes, &e.scAt, c) }

// tableIndex returns 1 + the index of x in the table list, adding it when
// new (0: nil); the first tableScan entries are searched in place, the
// others through the map at.
func tableIndex[T comparable](list *[]T, at *map[T]int, x T) int {
	var none T
	if x == none {
		return 0
	}
	if i, ok := (*at)[x]; ok {
		return i
	}
	for i, y := range (*list)[:min(len(*list), tableScan)] {
		if y == x {
			return i + 1
		}
	}
	*list = append(*list, x)
	if len(*list) > tableScan {
		if *at == nil {
			*at = map[T]int{}
		}
		(*at)[x] = len(*list)
	}
	return len(*list)
}

func (e *encoder) sym(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, 0)
	}
	p := unsafe.StringData(s)
	slot := &e.recent[(uintptr(unsafe.Pointer(p))>>4^uintptr(len(s)))%uintptr(len(e.recent))]
	if unsafe.StringData(slot.s) == p && len(slot.s) == len(s) {
		return binary.AppendUvarint(dst, uint64(slot.id))
	}
	id, isNew := e.syms.id(s)
	if isNew {
		e.newSyms = append(e.newSyms, e.syms.names[id])
	}
	*slot = symCached{s, id}
	return binary.AppendUvarint(dst, uint64(id))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// encodeTrace returns t's body (of bodyVersion), written in e.tmp (valid
// until the next call).
func (e *encoder) encodeTrace(t *trace.Trace) []byte {
	e.tmp = e.appendTrace(e.tmp[:0], t)
	return e.tmp
}

// appendTrace appends t's body (of bodyVersion) to dst. Spans are stored in the trace's tree order, so a parent always comes
// before its children and is referred to by index. The trace's resources
// and scopes are stored once, in tables before the spans; a span refers
// to its entries by index.
func (e *encoder) appendTrace(dst []byte, t *trace.Trace) []byte {
	b := append(dst, bodyVersion)
	b = binary.BigEndian.AppendUint64(b, t.ID.Hi)
	b = binary.BigEndian.AppendUint64(b, t.ID.Lo)
	b = binary.AppendUvarint(b, uint64(t.Part))
	b = binary.AppendUvarint(b, uint64(len(t.Broken)))
	for _, r := range t.Broken {
		b = appendString(b, r)
	}
	start := t.Start()
	b = binary.AppendVarint(b, start)
	e.tables(t)
	b = binary.AppendUvarint(b, uint64(len(e.res)))
	for _, r := range e.res {
		b = e.attrs(b, r.Attributes)
	}
	b = binary.AppendUvarint(b, uint64(len(e.scopes)))
	for _, c := range e.scopes {
		b = appendString(b, c.Name)
		b = appendString(b, c.Version)
		b = e.attrs(b, c.Attributes)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Spans)))
	for i := range t.Spans {
		s := &t.Spans[i]
		var flags byte
		if s.Error {
			flags |= 1
		}
		if s.Parent >= 0 {
			flags |= 2
		} else if s.ParentID != 0 {
			flags |= 4
		}
		flags |= byte(s.Source&7) << 3
		if s.Resource != nil || s.Scope != nil {
			flags |= 64
		}
		if !noKieker(s) {
			flags |= kiekerFlag
		}
		b = append(b, flags, byte(s.Kind)|byte(s.Status)<<4)
		if flags&64 != 0 {
			b = binary.AppendUvarint(b, uint64(e.resIndex(s.Resource)))
			b = binary.AppendUvarint(b, uint64(e.scopeIndex(s.Scope)))
		}
		b = binary.BigEndian.AppendUint64(b, uint64(s.SpanID))
		switch {
		case s.Parent >= 0:
			b = binary.AppendUvarint(b, uint64(s.Parent))
		case s.ParentID != 0:
			b = binary.BigEndian.AppendUint64(b, uint64(s.ParentID))
		}
		b = binary.AppendVarint(b, s.Start-start)
		b = binary.AppendVarint(b, s.End-s.Start)
		b = e.sym(b, s.Operation)
		b = e.sym(b, s.Component)
		b = e.sym(b, s.Host)
		b = e.sym(b, s.Service)
		b = e.sym(b, s.Thread)
		b = appendString(b, s.Process)
		b = appendString(b, s.Session)
		b = appendString(b, s.StatusMessage)
		if flags&kiekerFlag != 0 {
			b = binary.AppendVarint(b, int64(s.OrderIndex))
			b = binary.AppendVarint(b, int64(s.EOI))
			b = binary.AppendVarint(b, int64(s.ESS))
			b = binary.AppendVarint(b, s.KiekerTrace-int64(t.ID.Lo))
		}
		b = e.attrs(b, s.Attributes)
		b = binary.AppendUvarint(b, uint64(len(s.Events)))
		for _, ev := range s.Events {
			b = e.sym(b, ev.Name)
			b = binary.AppendVarint(b, ev.Time-s.Start)
			b = e.attrs(b, ev.Attributes)
		}
		b = binary.AppendUvarint(b, uint64(len(s.Links)))
		for _, l := range s.Links {
			b = binary.BigEndian.AppendUint64(b, l.TraceID.Hi)
			b = binary.BigEndian.AppendUint64(b, l.TraceID.Lo)
			b = binary.BigEndian.AppendUint64(b, uint64(l.SpanID))
			b = append(b, byte(l.Kind))
			b = appendString(b, l.TraceState)
			b = e.attrs(b, l.Attributes)
		}
	}
	// The trace's name is indexed by its symbol; a zorka trace's type is
	// an attribute value, kept as text in the body, so it is defined here.
	if id, isNew := e.syms.id(t.Name()); isNew && id != 0 {
		e.newSyms = append(e.newSyms, e.syms.names[id])
	}
	clear(e.res)
	clear(e.scopes)
	return b
}

func (e *encoder) attrs(b []byte, as []trace.Attr) []byte {
	b = binary.AppendUvarint(b, uint64(len(as)))
	for _, a := range as {
		b = e.sym(b, a.Key)
		b = append(b, byte(a.Type))
		b = appendString(b, a.Value)
	}
	return b
}

// decoder reads a trace body. Its error sticks: fields are read one after
// the other and checked once.
type decoder struct {
	p    []byte
	off  int
	err  error
	syms *symbols
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", errCorrupt, what, d.off)
	}
}

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.p)-d.off < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(d.p[d.off:])
	d.off += 8
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.p) {
		d.fail("truncated")
		return 0
	}
	v := d.p[d.off]
	d.off++
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.p[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) count(limit uint64, what string) int {
	n := d.uvarint()
	if n > limit || n > uint64(len(d.p)-d.off) {
		d.fail(what + " count")
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > maxStringLen || n > uint64(len(d.p)-d.off) {
		d.fail("string length")
		return ""
	}
	if n == 0 {
		return ""
	}
	// The bytes are a block's payload, which nothing writes once it is
	// decompressed: the string shares them instead of copying. (One
	// exception: buildBlock reads a head's chunks one after the other
	// into one buffer; the block writer copies what bodyTerms returns
	// before the next chunk is read, and nothing there may keep it.)
	s := unsafe.String(&d.p[d.off], int(n))
	d.off += int(n)
	return s
}

func (d *decoder) sym() string {
	id := d.uvarint()
	if d.err != nil {
		return ""
	}
	s, ok := d.syms.name(id)
	if !ok {
		d.fail(fmt.Sprintf("unknown symbol %d", id))
	}
	return s
}

func (d *decoder) attrs() []trace.Attr {
	n := d.count(maxListLen, "attribute")
	if n == 0 {
		return nil
	}
	as := make([]trace.Attr, n)
	for i := range as {
		as[i].Key = d.sym()
		as[i].Type = trace.ValueType(d.byte())
		as[i].Value = d.str()
	}
	return as
}

// decodeTrace reads a trace body of any version (its first byte).
func decodeTrace(p []byte, syms *symbols) (*trace.Trace, error) {
	d := &decoder{p: p, syms: syms}
	version := d.byte()
	if d.err == nil && (version < 1 || version > bodyVersion) {
		return nil, fmt.Errorf("%w: trace body version %d (this tracebridge reads 1 to %d)", errCorrupt, version, bodyVersion)
	}
	t := &trace.Trace{}
	t.ID.Hi, t.ID.Lo = d.u64(), d.u64()
	t.Part = int(d.uvarint())
	if nb := d.count(maxListLen, "broken"); nb > 0 {
		t.Broken = make([]string, nb)
		for i := range t.Broken {
			t.Broken[i] = d.str()
		}
	}
	start := d.varint()
	if version >= 2 {
		if nr := d.count(maxListLen, "resource"); nr > 0 {
			t.Resources = make([]*trace.Resource, nr)
			rs := make([]trace.Resource, nr)
			for i := range rs {
				rs[i].Attributes = d.attrs()
				t.Resources[i] = &rs[i]
			}
		}
		if nc := d.count(maxListLen, "scope"); nc > 0 {
			t.Scopes = make([]*trace.Scope, nc)
			cs := make([]trace.Scope, nc)
			for i := range cs {
				cs[i].Name, cs[i].Version = d.str(), d.str()
				cs[i].Attributes = d.attrs()
				t.Scopes[i] = &cs[i]
			}
		}
	}
	n := d.count(maxSpansPerTrace, "span")
	if d.err != nil {
		return nil, d.err
	}
	t.Spans = make([]trace.Span, n)
	for i := range t.Spans {
		s := &t.Spans[i]
		flags := d.byte()
		ks := d.byte()
		s.Error = flags&1 != 0
		s.Source = trace.Source(flags >> 3 & 7)
		s.Kind, s.Status = trace.Kind(ks&15), trace.Status(ks>>4)
		if version >= 2 && flags&64 != 0 {
			ri, ci := d.uvarint(), d.uvarint()
			if ri > uint64(len(t.Resources)) || ci > uint64(len(t.Scopes)) {
				d.fail("resource or scope index")
			} else {
				if ri > 0 {
					s.Resource = t.Resources[ri-1]
				}
				if ci > 0 {
					s.Scope = t.Scopes[ci-1]
				}
			}
		}
		s.SpanID = trace.SpanID(d.u64())
		s.Parent = -1
		switch {
		case flags&2 != 0:
			p := d.uvarint()
			if p >= uint64(i) {
				d.fail("parent index")
				break
			}
			s.Parent = int32(p)
			s.ParentID = t.Spans[p].SpanID
			s.Depth = t.Spans[p].Depth + 1
		case flags&4 != 0:
			s.ParentID = trace.SpanID(d.u64())
		}
		s.Start = start + d.varint()
		s.End = s.Start + d.varint()
		s.Operation, s.Component, s.Host, s.Service, s.Thread = d.sym(), d.sym(), d.sym(), d.sym(), d.sym()
		s.Process, s.Session, s.StatusMessage = d.str(), d.str(), d.str()
		if version < 3 || flags&kiekerFlag != 0 {
			s.OrderIndex, s.EOI, s.ESS = int32(d.varint()), int32(d.varint()), int32(d.varint())
			s.KiekerTrace = d.varint() + int64(t.ID.Lo)
		} else {
			s.OrderIndex, s.EOI, s.ESS = -1, -1, -1
		}
		s.Attributes = d.attrs()
		if ne := d.count(maxListLen, "event"); ne > 0 {
			s.Events = make([]trace.Event, ne)
			for j := range s.Events {
				s.Events[j].Name = d.sym()
				s.Events[j].Time = s.Start + d.varint()
				s.Events[j].Attributes = d.attrs()
			}
		}
		if nl := d.count(maxListLen, "link"); nl > 0 {
			s.Links = make([]trace.Link, nl)
			for j := range s.Links {
				l := &s.Links[j]
				l.TraceID.Hi, l.TraceID.Lo = d.u64(), d.u64()
				l.SpanID = trace.SpanID(d.u64())
				l.Kind = trace.LinkKind(d.byte())
				l.TraceState = d.str()
				l.Attributes = d.attrs()
			}
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if d.off != len(p) {
		d.fail("trailing bytes")
	}
	return t, d.err
}

// textOf calls f with every string of span s that text search looks at:
// operation, class, attribute keys and values, the status message
// (Kieker's exception class) and the attributes of exception events.
func textOf(s *trace.Span, f func(string)) {
	f(s.Operation)
	f(s.Component)
	f(s.StatusMessage)
	for _, a := range s.Attributes {
		f(a.Key)
		f(a.Value)
	}
	for _, ev := range s.Events {
		if ev.Name != "exception" {
			continue
		}
		for _, a := range ev.Attributes {
			f(a.Value)
		}
	}
}

// appendTerms appends the terms a block's term index lists t under (see
// block.Term): its spans' attributes, status messages and exception
// events' attributes, and the attributes of its resources and scopes
// (with otel.scope.name and otel.scope.version). Kieker's positions
// (trace.KiekerAttrs) are left out: a search by them does not use the
// term index. Repeats are left to the writer.
func appendTerms(dst []block.Term, t *trace.Trace) []block.Term {
	// The tables first, as a body holds them (bodyTerms reads them in
	// the body's order; a row's terms may come in any order).
	for _, r := range t.Resources {
		for _, a := range r.Attributes {
			dst = append(dst, block.Term{Key: a.Key, Value: a.Value})
		}
	}
	for _, c := range t.Scopes {
		dst = append(dst, block.Term{Key: trace.ScopeNameKey, Value: c.Name}, block.Term{Key: trace.ScopeVersionKey, Value: c.Version})
		for _, a := range c.Attributes {
			dst = append(dst, block.Term{Key: a.Key, Value: a.Value})
		}
	}
	for i := range t.Spans {
		s := &t.Spans[i]
		for _, a := range s.Attributes {
			dst = append(dst, block.Term{Key: a.Key, Value: a.Value})
		}
		if s.StatusMessage != "" {
			dst = append(dst, block.Term{Value: s.StatusMessage})
		}
		for _, ev := range s.Events {
			if ev.Name != "exception" {
				continue
			}
			for _, a := range ev.Attributes {
				dst = append(dst, block.Term{Key: a.Key, Value: a.Value})
			}
		}
	}
	return dst
}

// trigrams calls f with the hash of every trigram of the lower-cased s.
func trigrams(s string, f func(uint64)) {
	if len(s) < 3 {
		return
	}
	l := strings.ToLower(s)
	for i := 0; i+3 <= len(l); i++ {
		f(block.HashString(l[i : i+3]))
	}
}

// pairHash is the hash of an attribute pair in the block filters.
func pairHash(key, value string) uint64 { return block.HashPair(key, value) }

var _ = math.MaxInt32

// bodyTerms appends the terms of the trace body p (of any version) to dst:
// appendTerms of the decoded trace, in the same order, but read straight
// from the body without building the trace (the strings share p's
// bytes). A head's cut lists every trace's terms this way: decoding each
// trace once more cost about a fifth of the store's ingest CPU.
func bodyTerms(dst []block.Term, p []byte, syms *symbols) ([]block.Term, error) {
	d := &decoder{p: p, syms: syms}
	version := d.byte()
	if d.err == nil && (version < 1 || version > bodyVersion) {
		return dst, fmt.Errorf("%w: trace body version %d (this tracebridge reads 1 to %d)", errCorrupt, version, bodyVersion)
	}
	d.off += 16 // the trace id
	if d.off > len(p) {
		d.fail("truncated")
	}
	d.uvarint() // part
	for range d.count(maxListLen, "broken") {
		d.str()
	}
	d.varint() // start
	base := len(dst)
	var nres, nsc int
	if version >= 2 {
		nres = d.count(maxListLen, "resource")
		for range nres {
			dst = d.termAttrs(dst)
		}
		nsc = d.count(maxListLen, "scope")
		for range nsc {
			name, ver := d.str(), d.str()
			dst = append(dst, block.Term{Key: trace.ScopeNameKey, Value: name}, block.Term{Key: trace.ScopeVersionKey, Value: ver})
			dst = d.termAttrs(dst)
		}
	}
	n := d.count(maxSpansPerTrace, "span")
	for i := 0; i < n && d.err == nil; i++ {
		flags := d.byte()
		d.byte() // kind and status
		if version >= 2 && flags&64 != 0 {
			ri, ci := d.uvarint(), d.uvarint()
			if ri > uint64(nres) || ci > uint64(nsc) {
				d.fail("resource or scope index")
			}
		}
		d.u64() // span id
		switch {
		case flags&2 != 0:
			if d.uvarint() >= uint64(i) {
				d.fail("parent index")
			}
		case flags&4 != 0:
			d.u64()
		}
		d.varint()
		d.varint()
		for range 5 { // operation, class, host, service, thread
			d.sym()
		}
		d.str() // process
		d.str() // session
		if msg := d.str(); msg != "" {
			dst = append(dst, block.Term{Value: msg})
		}
		if version < 3 || flags&kiekerFlag != 0 {
			for range 4 { // orderIndex, eoi, ess, Kieker trace
				d.varint()
			}
		}
		dst = d.termAttrs(dst)
		for range d.count(maxListLen, "event") {
			name := d.sym()
			d.varint()
			if name == "exception" {
				dst = d.termAttrs(dst)
			} else {
				d.skipAttrs()
			}
		}
		for range d.count(maxListLen, "link") {
			d.u64()
			d.u64()
			d.u64()
			d.byte()
			d.str()
			d.skipAttrs()
		}
	}
	if d.err == nil && d.off != len(p) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return dst[:base], d.err
	}
	return dst, nil
}

// termAttrs appends a list of attributes as terms.
func (d *decoder) termAttrs(dst []block.Term) []block.Term {
	for range d.count(maxListLen, "attribute") {
		k := d.sym()
		d.byte()
		dst = append(dst, block.Term{Key: k, Value: d.str()})
	}
	return dst
}

// skipAttrs reads past a list of attributes.
func (d *decoder) skipAttrs() {
	for range d.count(maxListLen, "attribute") {
		d.sym()
		d.byte()
		d.str()
	}
}
