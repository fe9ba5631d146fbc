package trace

import (
	"math"
	"slices"
)

// Packed traces.
//
// An assembler with Options.Packed completes a trace of span records
// without making its Spans: the trace keeps the bytes its spans waited
// in (pending.go's layout), the strings of the dictionary they refer to,
// and its tree, computed on the spans' ids and times (treeScratch.order,
// as for Spans): for each place of tree order, the span's offset in the
// bytes, its parent's place and its depth (12 bytes a span, where a Span
// with its attributes takes 400 and more). A consumer that encodes the
// trace at once (the store) reads it through an Unpacker, which makes
// its Spans in memory reused from one trace to the next; Unpack makes
// them for good.

// PackedSpans are a trace's spans as they waited for it (its fields are
// the assembler's).
type PackedSpans struct {
	buf  []byte   // the spans' bytes, never written again
	strs []string // the dictionary's strings they refer to (only read)
	lean bool
	// nattrs counts the spans' attributes, inline the bytes of their
	// inline strings.
	nattrs, inline int
	// at holds, for the span at each place of tree order, its offset in
	// buf, the place of its parent (-1: a root) and its depth.
	at []int32
}

// SpanCount returns the number of t's spans, packed or not.
func (t *Trace) SpanCount() int {
	if t.Packed != nil {
		return len(t.Packed.at) / 3
	}
	return len(t.Spans)
}

// Source returns what t's first span was assembled from (0: t has no
// spans). A trace's spans come from one source unless its records mixed
// them.
func (t *Trace) Source() Source {
	switch {
	case t.Packed != nil:
		return FromSpan
	case len(t.Spans) > 0:
		return t.Spans[0].Source
	}
	return 0
}

// Unpack makes t's Spans when they are packed (they are then t's own, as
// an assembler without Options.Packed makes them). Only the goroutine
// that owns t may call it: a trace shared by several consumers is not
// modified.
func (t *Trace) Unpack() {
	p := t.Packed
	if p == nil {
		return
	}
	n := len(p.at) / 3
	spans := make([]Span, n)
	attrs := make([]Attr, p.nattrs)
	r := pendingReader{b: p.buf, strs: p.strs}
	if p.inline > 0 {
		r.inl = make([]byte, 0, p.inline)
	}
	p.read(&r, spans, t, p.lean, &attrs)
	t.Spans, t.Packed = spans, nil
}

// read reads the spans into spans (len(p.at)/3 of them) in tree order;
// lean leaves out what a lean assembler does not keep (Resource, Scope,
// attributes, events and links).
func (p *PackedSpans) read(r *pendingReader, spans []Span, t *Trace, lean bool, attrs *[]Attr) {
	for k := range spans {
		s := &spans[k]
		r.off = int(p.at[3*k])
		r.span(s, lean, t.Resources, t.Scopes, attrs)
		s.Parent, s.Depth = p.at[3*k+1], p.at[3*k+2]
	}
}

// Unpacker makes the Spans of packed traces in memory of its own, reused
// from one trace to the next, for a consumer that reads a trace at once
// (the store encodes it, the Kieker log writes its spans). An Unpacker
// is used by one goroutine; several Unpackers may read the same packed
// trace at once (it is only read).
type Unpacker struct {
	// Lean: the Spans are made as a lean assembler makes them (no
	// Resource, Scope, attributes, events or links), for a consumer
	// that reads a trace's shape only (pipeline.LeanTraceConsumer): a
	// span's read ends after its head and names.
	Lean bool

	t      Trace
	spans  []Span
	attrs  []Attr
	events eventArena
}

// Trace returns t with its Spans: t itself when they are not packed, else
// a copy of t whose Spans (with their attributes and events) live in u's
// memory until the next call of Trace or Release. Their strings are t's
// or its dictionary's, valid as long as they are referenced (the bytes
// they point into are never written again).
func (u *Unpacker) Trace(t *Trace) *Trace {
	p := t.Packed
	if p == nil {
		return t
	}
	n := len(p.at) / 3
	if cap(u.spans) < n {
		u.spans = make([]Span, n)
	}
	lean := p.lean || u.Lean
	nattrs := p.nattrs
	if lean {
		nattrs = 0
	}
	if cap(u.attrs) < nattrs {
		u.attrs = make([]Attr, nattrs)
	}
	spans, attrs := u.spans[:n], u.attrs[:nattrs]
	u.events.events, u.events.attrs = u.events.events[:0], u.events.attrs[:0]
	r := pendingReader{b: p.buf, strs: p.strs, view: true, events: &u.events}
	p.read(&r, spans, t, lean, &attrs)
	u.t = Trace{ID: t.ID, Spans: spans, Broken: t.Broken, Part: t.Part, Resources: t.Resources, Scopes: t.Scopes}
	return &u.t
}

// Release lets go of the last trace's memory when it was large (a trace
// of more spans than most): the memory of small ones is kept for the
// next.
func (u *Unpacker) Release() {
	u.t = Trace{}
	if cap(u.spans) > 1<<12 {
		u.spans = nil
	}
	if cap(u.attrs) > 1<<14 {
		u.attrs = nil
	}
	if cap(u.events.events) > 1<<12 || cap(u.events.attrs) > 1<<14 {
		u.events = eventArena{}
	}
}

// pack gives t f's pending spans packed, with their tree (t.Broken gets
// what is wrong with it); false, with t and f unchanged, when two spans
// share an id (tree then decides on their content whether one is a
// copy) or f's bytes are not sound.
func (a *Assembler) pack(f *family, t *Trace) bool {
	if len(f.buf) > math.MaxInt32 {
		return false
	}
	sc := &a.trees
	n := f.pending
	sc.begin(n)
	defer sc.end()
	nodes := sc.nodes[:0]
	offs := slices.Grow(sc.offs[:0], n)
	r := pendingReader{b: f.buf, strs: f.dict.strs}
	nattrs := 0
	for range n {
		off := r.off
		nd := r.head()
		if r.bad || sc.find(nd.id) >= 0 {
			return false
		}
		sc.put(nd.id, len(nodes))
		nodes = append(nodes, nd)
		offs = append(offs, int32(off))
		r.skip(a.opt.Lean, &nattrs)
	}
	sc.nodes, sc.offs = nodes, offs
	if r.bad || r.off != len(f.buf) || nattrs != f.nattrs {
		return false
	}
	at := make([]int32, 3*n)
	for i, off := range offs {
		at[3*i] = off
	}
	name := func(i int32) string {
		r := pendingReader{b: f.buf, strs: f.dict.strs, off: int(at[3*i])}
		r.head()
		r.off += 2
		return r.str()
	}
	sc.order(nodes, name, &t.Broken)
	// at holds the offsets by arrival; put each span's at its place.
	for i := range int32(n) {
		k := sc.newAt[i]
		at[3*k+1], at[3*k+2] = sc.place[i], sc.depth[i]
	}
	for i := range int32(n) {
		for sc.newAt[i] != i {
			j := sc.newAt[i]
			at[3*i], at[3*j] = at[3*j], at[3*i]
			sc.newAt[i], sc.newAt[j] = sc.newAt[j], sc.newAt[i]
		}
	}
	t.Packed = &PackedSpans{buf: f.buf, strs: f.dict.strs[:len(f.dict.strs):len(f.dict.strs)], lean: a.opt.Lean, nattrs: f.nattrs, inline: f.inline, at: at}
	return true
}
