package otlp

import (
	"errors"
	"fmt"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Default limits.
const (
	DefaultMaxMessageSize = 16 << 20
	DefaultMaxAttributes  = 1024
	DefaultMaxEvents      = 1024
	DefaultMaxLinks       = 1024
	DefaultMaxStringLen   = 1 << 20
	DefaultMaxDepth       = 32
	DefaultMaxBatch       = 1024
)

// Options are the decoder's limits; 0 means the default.
type Options struct {
	// MaxMessageSize is the largest message Decode accepts (16 MiB).
	MaxMessageSize int
	// MaxAttributes bounds the attributes of a span, a resource, a
	// scope, an event and a link (1024 each).
	MaxAttributes int
	// MaxEvents and MaxLinks bound a span's events and links (1024).
	MaxEvents, MaxLinks int
	// MaxStringLen bounds every string and bytes value, keys and names
	// included (1 MiB).
	MaxStringLen int
	// MaxDepth bounds the nesting of attribute values: a scalar is at
	// depth 1, the items of an array at 2 (32).
	MaxDepth int
	// MaxBatch is how many spans a batch takes before Decode goes on in
	// a batch of the next function it was given (1024).
	MaxBatch int
	// Strings, when set, is shared by decoders behind their own tables
	// (see Strings).
	Strings *Strings
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxMessageSize, DefaultMaxMessageSize)
	def(&o.MaxAttributes, DefaultMaxAttributes)
	def(&o.MaxEvents, DefaultMaxEvents)
	def(&o.MaxLinks, DefaultMaxLinks)
	def(&o.MaxStringLen, DefaultMaxStringLen)
	def(&o.MaxDepth, DefaultMaxDepth)
	def(&o.MaxBatch, DefaultMaxBatch)
	return o
}

// Result says what Decode made of a message.
type Result struct {
	// Batches are the batches the spans were added to: the one given to
	// Decode first, then those next gave, in order. The slice is the
	// Decoder's, valid until its next Decode. After an error the spans
	// of the message are taken back and the batches from next are empty.
	Batches []*record.Batch
	// Spans is the number of span records added, Rejected the number of
	// spans rejected (OTLP's rejected_spans).
	Spans, Rejected int
	// Reason says why the first rejected span was rejected ("" when
	// none was).
	Reason string
}

// Errors wrapped by *Error.
var (
	// ErrMalformed: the message is not well-formed protobuf or JSON, or
	// not an ExportTraceServiceRequest.
	ErrMalformed = errors.New("malformed OTLP message")
	// ErrTooLarge: the message exceeds Options.MaxMessageSize.
	ErrTooLarge = errors.New("OTLP message too large")
)

// Error is a message Decode could not read: where and why.
type Error struct {
	// Offset is the byte offset in the message where reading failed.
	Offset int
	Reason string
	// Err is ErrMalformed or ErrTooLarge.
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("otlp: offset %d: %s", e.Offset, e.Reason) }

// Unwrap returns ErrMalformed or ErrTooLarge.
func (e *Error) Unwrap() error { return e.Err }

func malformed(off int, format string, args ...any) *Error {
	return &Error{Offset: off, Reason: fmt.Sprintf(format, args...), Err: ErrMalformed}
}

// Decoder decodes OTLP trace exports into span records. It keeps an
// interner and scratch memory between messages; it is not safe for
// concurrent use.
type Decoder struct {
	opt   Options
	tab   strtab   // interned strings
	attrs *attrtab // span attributes seen before, by their bytes

	sp  span
	res resource
	// scope, scopeVersion and scopeAttrs are the current scope's.
	scope, scopeVersion string
	scopeAttrs          []attr

	// nodes is the arena of the attribute value being read; strs holds
	// the bytes of its strings that are not in the message (unescaped
	// JSON); order is scratch for sorting a key-value list's members.
	nodes []node
	strs  []byte
	order []int32
	buf   []byte // text being built (numbers, JSON)

	// The batch being filled, the number of records it had before the
	// message, and what Decode tells the caller.
	b       *record.Batch
	first   int
	next    func() *record.Batch
	batches []*record.Batch
	result  Result
	mixed   bool // the batch holds spans of more than one host or service
}

// NewDecoder returns a decoder with the limits of o.
func NewDecoder(o Options) *Decoder {
	return &Decoder{opt: o.withDefaults(), tab: newStrtab(localStrings), attrs: newAttrtab()}
}

// Interned returns the number of strings the decoder holds interned.
func (d *Decoder) Interned() int { return d.tab.len() }

// start prepares decoding one message into b.
func (d *Decoder) start(b *record.Batch, next func() *record.Batch) {
	clear(d.batches)
	d.b, d.first, d.next = b, b.Len(), next
	d.batches = append(d.batches[:0], b)
	d.result = Result{}
	d.mixed = false
	d.res.reset()
	d.resetScope()
}

// resetScope forgets the current scope (a new one begins).
func (d *Decoder) resetScope() {
	d.scope, d.scopeVersion = "", ""
	clear(d.scopeAttrs)
	d.scopeAttrs = d.scopeAttrs[:0]
	d.res.listOf = nil // the resource list holds the scope's attributes
}

// finish ends a message; on error the spans it added are taken back.
func (d *Decoder) finish(err error) (Result, error) {
	if err != nil {
		d.batches[0].Truncate(d.first)
		for _, b := range d.batches[1:] {
			b.Reset()
		}
		d.result.Spans = 0
	}
	r := d.result
	r.Batches = d.batches
	d.b, d.next = nil, nil
	d.res.reset()
	return r, err
}

// str interns b.
func (d *Decoder) str(b []byte) string {
	s, _ := d.tab.get(b, d.opt.Strings)
	return s
}

// intern interns b, saying whether it was seen before.
func (d *Decoder) intern(b []byte) (string, bool) { return d.tab.get(b, d.opt.Strings) }

// span is the span being read.
type span struct {
	off              int // offset of the span's message, for reasons
	traceHi, traceLo uint64
	id, parent       uint64
	traceState, name string
	statusMsg        string
	kind, status     uint64
	start, end       uint64
	flags            uint32
	attrs            []attr
	nEvents, nLinks  int
	events           []string // name, time, attributes per event
	links            []string // trace id, span id, trace state, attributes per link
	reject           string
}

func (s *span) reset(off int) {
	attrs, events, links := s.attrs[:0], s.events[:0], s.links[:0]
	clear(s.attrs)
	clear(s.events)
	clear(s.links)
	*s = span{off: off, attrs: attrs, events: events, links: links}
}

// rejectf notes the first reason the span is unusable.
func (s *span) rejectf(format string, args ...any) {
	if s.reject == "" {
		s.reject = fmt.Sprintf("span at offset %d: ", s.off) + fmt.Sprintf(format, args...)
	}
}

// attr is one attribute as text.
type attr struct {
	key, value string
	typ        trace.ValueType
}

// resource is the current resource.
type resource struct {
	service, host, process string
	attrs                  []attr
	reject                 string
	// list and types are the resource list values made for batch listOf.
	list, types record.Value
	listOf      *record.Batch
}

func (r *resource) reset() {
	attrs := r.attrs[:0]
	clear(r.attrs)
	*r = resource{attrs: attrs}
}

func (r *resource) rejectf(off int, format string, args ...any) {
	if r.reject == "" {
		r.reject = fmt.Sprintf("resource at offset %d: ", off) + fmt.Sprintf(format, args...)
	}
}

// Well-known attribute keys.
const (
	keyService   = "service.name"
	keyHost      = "host.name"
	keyPID       = "process.pid"
	keyThreadID  = "thread.id"
	keyThread    = "thread.name"
	keyNamespace = "code.namespace"
)

// addResourceAttr files one resource attribute: all are kept, and
// service.name, host.name and process.pid are also noted for the fields
// of their own.
func (d *Decoder) addResourceAttr(a attr) {
	switch a.key {
	case keyService:
		d.res.service = a.value
	case keyHost:
		d.res.host = a.value
	case keyPID:
		d.res.process = a.value
	}
	d.res.attrs = append(d.res.attrs, a)
}

// resourceLists returns the resource list values (the resource's
// attributes, then the scope's as trace.ScopeMark says) for the current
// batch, making them once per batch and scope.
func (d *Decoder) resourceLists() (record.Value, record.Value) {
	r := &d.res
	if r.listOf != d.b {
		n := len(r.attrs)
		if d.scopeVersion != "" || len(d.scopeAttrs) > 0 {
			n += 1 + len(d.scopeAttrs)
		}
		r.list = d.b.NewList(record.String, 2*n)
		r.types = d.b.NewList(record.Byte, n)
		items, types := r.list.List().Items, r.types.List().Items
		put := func(i int, a attr) {
			items[2*i] = record.StringValue(a.key)
			items[2*i+1] = record.StringValue(a.value)
			types[i] = record.IntValue(int64(a.typ))
		}
		for i, a := range r.attrs {
			put(i, a)
		}
		if n > len(r.attrs) {
			put(len(r.attrs), attr{trace.ScopeVersionKey, d.scopeVersion, trace.ScopeMark})
			for i, a := range d.scopeAttrs {
				put(len(r.attrs)+1+i, a)
			}
		}
		r.listOf = d.b
	}
	return r.list, r.types
}

// addScopeAttr files one attribute of the current scope; problem is what
// is wrong with it ("" if nothing). A scope that breaks a limit rejects
// its spans, as a resource does.
func (d *Decoder) addScopeAttr(at int, key []byte, val int32, problem string, reject *string) {
	switch {
	case *reject != "":
	case problem != "":
		*reject = fmt.Sprintf("scope attribute at offset %d: %s", at, problem)
	case len(d.scopeAttrs) >= d.opt.MaxAttributes:
		*reject = fmt.Sprintf("scope at offset %d: more than %d attributes", at, d.opt.MaxAttributes)
	default:
		v, t, _ := d.text(val)
		d.scopeAttrs = append(d.scopeAttrs, attr{d.str(key), v, t})
	}
}

// setScopeVersion notes the current scope's version.
func (d *Decoder) setScopeVersion(at int, v []byte, reject *string) {
	if len(v) > d.opt.MaxStringLen {
		if *reject == "" {
			*reject = fmt.Sprintf("scope version at offset %d: %d bytes, limit %d", at, len(v), d.opt.MaxStringLen)
		}
		return
	}
	d.scopeVersion = d.str(v)
}

// checkIDs rejects a span whose ids are unusable. The lengths were
// checked when the ids were read.
func (s *span) checkIDs() {
	if s.traceHi == 0 && s.traceLo == 0 {
		s.rejectf("trace id is missing or all zero")
	}
	if s.id == 0 {
		s.rejectf("span id is missing or all zero")
	}
}

// addSpan turns the span read into a record, or counts its rejection.
func (d *Decoder) addSpan() {
	s := &d.sp
	s.checkIDs()
	if s.reject == "" && d.res.reject != "" {
		s.reject = d.res.reject
	}
	if s.reject != "" {
		d.result.Rejected++
		if d.result.Reason == "" {
			d.result.Reason = s.reject
		}
		return
	}
	if d.next != nil && d.b.Len() >= d.opt.MaxBatch {
		nb := d.next()
		nb.Origin = record.Origin{Receiver: d.b.Origin.Receiver, Peer: d.b.Origin.Peer, Session: d.b.Origin.Session}
		d.b = nb
		d.batches = append(d.batches, nb)
		d.mixed = false
	}
	b := d.b
	service := d.res.service
	if service == "" {
		// What OpenTelemetry's SDKs send without a service.name.
		service = trace.UnknownService
	}
	host := d.res.host
	if host == "" {
		host = service
	}
	if b.Len() == 0 {
		b.Origin.Host, b.Origin.Service = host, service
	} else if !d.mixed && (b.Origin.Host != host || b.Origin.Service != service) {
		b.Origin.Host, b.Origin.Service = "", ""
		d.mixed = true
	}
	resList, resTypes := d.resourceLists()

	r := b.Add(trace.SpanType, record.NoTimestamp)
	v := r.Values
	v[trace.SpanTraceIDHigh] = record.IntValue(int64(s.traceHi))
	v[trace.SpanTraceIDLow] = record.IntValue(int64(s.traceLo))
	v[trace.SpanSpanID] = record.IntValue(int64(s.id))
	v[trace.SpanParentID] = record.IntValue(int64(s.parent))
	v[trace.SpanName] = record.StringValue(s.name)
	v[trace.SpanService] = record.StringValue(service)
	v[trace.SpanHost] = record.StringValue(host)
	v[trace.SpanStart] = record.IntValue(int64(s.start))
	v[trace.SpanEnd] = record.IntValue(int64(s.end))
	kind := s.kind
	if kind > uint64(trace.KindConsumer) {
		kind = 0
	}
	v[trace.SpanKind] = record.IntValue(int64(kind))
	status := s.status
	if status > uint64(trace.StatusError) {
		status = 0
	}
	v[trace.SpanStatus] = record.IntValue(int64(status))
	v[trace.SpanStatusMessage] = record.StringValue(s.statusMsg)
	v[trace.SpanScope] = record.StringValue(d.scope)
	v[trace.SpanProcess] = record.StringValue(d.res.process)
	v[trace.SpanTraceState] = record.StringValue(s.traceState)
	v[trace.SpanFlags] = record.IntValue(int64(s.flags))

	attrs := b.NewList(record.String, 2*len(s.attrs))
	types := b.NewList(record.Byte, len(s.attrs))
	items, tItems := attrs.List().Items, types.List().Items
	var thread, threadName, component string
	for i, a := range s.attrs {
		items[2*i] = record.StringValue(a.key)
		items[2*i+1] = record.StringValue(a.value)
		tItems[i] = record.IntValue(int64(a.typ))
		switch a.key {
		case keyThreadID:
			thread = a.value
		case keyThread:
			threadName = a.value
		case keyNamespace:
			component = a.value
		}
	}
	if thread == "" {
		thread = threadName
	}
	v[trace.SpanThread] = record.StringValue(thread)
	v[trace.SpanComponent] = record.StringValue(component)
	v[trace.SpanAttributes], v[trace.SpanAttributeTypes] = attrs, types
	v[trace.SpanResource], v[trace.SpanResourceTypes] = resList, resTypes
	v[trace.SpanEvents] = d.stringList(s.events)
	v[trace.SpanLinks] = d.stringList(s.links)
	d.result.Spans++
}

func (d *Decoder) stringList(ss []string) record.Value {
	l := d.b.NewList(record.String, len(ss))
	items := l.List().Items
	for i, s := range ss {
		items[i] = record.StringValue(s)
	}
	return l
}
