package trace

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ID identifies a trace: 128 bits as OpenTelemetry and W3C Trace Context
// have them. A Kieker traceId (a Java long) is the low half, the high half
// zero (KiekerID).
type ID struct{ Hi, Lo uint64 }

// KiekerID returns the ID of a Kieker traceId.
func KiekerID(id int64) ID { return ID{Lo: uint64(id)} }

// IsZero reports whether the ID is all zeros (invalid in OTLP).
func (id ID) IsZero() bool { return id.Hi == 0 && id.Lo == 0 }

// Kieker reports whether the ID fits a Kieker traceId (the high half is
// zero) and returns it.
func (id ID) Kieker() (int64, bool) { return int64(id.Lo), id.Hi == 0 }

// Hex returns the 32 lowercase hex digits of the ID (OTLP's form).
func (id ID) Hex() string {
	var b [16]byte
	putUint64(b[:8], id.Hi)
	putUint64(b[8:], id.Lo)
	return hex.EncodeToString(b[:])
}

// String returns the ID as users know it: a Kieker traceId in decimal
// (its high half is zero), any other ID in 32 hex digits.
func (id ID) String() string {
	if k, ok := id.Kieker(); ok {
		return strconv.FormatInt(k, 10)
	}
	return id.Hex()
}

// ParseID parses a trace id: 32 hex digits (OTLP), or a decimal Kieker
// traceId (negative ones too).
func ParseID(s string) (ID, error) {
	if len(s) == 32 {
		b, err := hex.DecodeString(s)
		if err == nil {
			return ID{Hi: getUint64(b[:8]), Lo: getUint64(b[8:])}, nil
		}
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return KiekerID(v), nil
	}
	return ID{}, fmt.Errorf("trace id %q: want 32 hex digits or a decimal Kieker traceId", s)
}

// SpanID identifies a span within its trace (OTLP's 8 bytes as a number).
// Kieker's calls get ids derived from their trace and position. 0 means
// none (no parent).
type SpanID uint64

// String returns the 16 lowercase hex digits of the id.
func (s SpanID) String() string {
	var b [8]byte
	putUint64(b[:], uint64(s))
	return hex.EncodeToString(b[:])
}

// ParseSpanID parses 16 hex digits.
func ParseSpanID(s string) (SpanID, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 {
		return 0, fmt.Errorf("span id %q: want 16 hex digits", s)
	}
	return SpanID(getUint64(b)), nil
}

func putUint64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func getUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}

// Kind is a span's kind, OTLP's SpanKind.
type Kind uint8

// The kinds, numbered as OTLP numbers them.
const (
	KindUnspecified Kind = iota
	KindInternal
	KindServer
	KindClient
	KindProducer
	KindConsumer
)

var kindNames = [...]string{"unspecified", "internal", "server", "client", "producer", "consumer"}

// String returns the kind's name in lower case ("server").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unspecified"
}

// Status is a span's status code, OTLP's.
type Status uint8

// The status codes.
const (
	StatusUnset Status = iota
	StatusOK
	StatusError
)

// ValueType is the type of an attribute value.
type ValueType uint8

// The attribute value types. Values are kept as text: strings as they
// are, booleans as true/false, integers and doubles in decimal (Go's
// shortest form), bytes in base64, arrays and maps as JSON.
const (
	TypeString ValueType = iota + 1
	TypeBool
	TypeInt
	TypeDouble
	TypeBytes
	TypeJSON // an array or a key-value list, as JSON
)

var typeNames = [...]string{"", "string", "bool", "int64", "float64", "bytes", "json"}

// String returns the type's name (Jaeger's tag types: string, bool, int64,
// float64, binary-ish bytes, json).
func (t ValueType) String() string {
	if int(t) < len(typeNames) && t != 0 {
		return typeNames[t]
	}
	return "string"
}

// Attr is one attribute (OTLP attribute, Kieker record field, zorka
// attribute).
type Attr struct {
	Key   string
	Value string
	Type  ValueType
}

// Event is something that happened during a span (OTLP span event; an
// exception; a Kieker CallOperationEvent).
type Event struct {
	Name       string
	Time       int64 // epoch ns
	Attributes []Attr
}

// LinkKind says what a link expresses.
type LinkKind uint8

// The link kinds.
const (
	LinkFollowsFrom LinkKind = iota // OTLP span link
	LinkSplit                       // a thread started at this point (Kieker SplitEvent)
	LinkJoin                        // a thread was joined here (Kieker JoinEvent)
	LinkRemote                      // a call into another process
)

var linkNames = [...]string{"follows-from", "split", "join", "remote"}

// String names the link kind.
func (k LinkKind) String() string {
	if int(k) < len(linkNames) {
		return linkNames[k]
	}
	return "follows-from"
}

// Link points from a span to another span, of this trace or another.
type Link struct {
	TraceID    ID
	SpanID     SpanID
	Kind       LinkKind
	TraceState string
	Attributes []Attr
}

// Source says what a span was assembled from.
type Source uint8

// The sources.
const (
	FromEvents    Source = iota + 1 // Kieker trace events (TraceMetadata, Before/After, …)
	FromExecution                   // Kieker OperationExecutionRecords (eoi/ess)
	FromSpan                        // span records (OTLP, zorka, our clients)
)

var sourceNames = [...]string{"", "kieker-events", "kieker-executions", "spans"}

// String names the source.
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "?"
}

// Sources is a set of Sources.
type Sources uint8

// Has reports whether s holds src.
func (s Sources) Has(src Source) bool { return s&(1<<src) != 0 }

// SourcesOf returns the set of the given sources.
func SourcesOf(src ...Source) Sources {
	var s Sources
	for _, x := range src {
		s |= 1 << x
	}
	return s
}

// AllSources holds every source.
var AllSources = SourcesOf(FromEvents, FromExecution, FromSpan)

// UnknownService names the service of spans that name none (and the
// host of traces that name neither a host nor a service): OpenTelemetry's
// name, what its SDKs send without a service.name. The OTLP decoder, the
// store's partitions and Jaeger's service list all use it.
const UnknownService = "unknown_service"

// Span is one call, operation or OTLP span of a trace.
type Span struct {
	SpanID SpanID
	// ParentID is the parent span (0 for a root); Parent is its index in
	// the trace's Spans (-1 for a root, or a parent that is missing).
	ParentID SpanID
	Parent   int32
	// Depth is the nesting depth in the assembled tree (0 for roots).
	Depth int32

	// Operation is the full operation signature as logged (Kieker) or the
	// span name (OTLP); Component the class (Kieker classSignature, the
	// class parsed from an OER's signature, zorka's class; OTLP:
	// code.namespace or the instrumentation scope).
	Operation, Component string
	// Host and Service: where the span ran (Kieker hostname; OTLP
	// host.name and service.name). Process and Thread as known (Kieker:
	// threadId; OTLP: process.pid, thread.id/thread.name). Session is
	// Kieker's sessionId.
	Host, Service, Process, Thread, Session string

	Start, End int64 // epoch ns
	Kind       Kind
	Status     Status
	// Error is set for a failed call (Kieker After…FailedEvent, OTLP
	// status error, a zorka exception).
	Error         bool
	StatusMessage string

	Attributes []Attr
	Events     []Event
	Links      []Link

	// Kieker's positions: the Before event's orderIndex, or an OER's eoi
	// and ess (-1 when not known), and the Kieker traceId of the thread's
	// part of the trace.
	OrderIndex, EOI, ESS int32
	KiekerTrace          int64

	Source Source

	// Resource and Scope are the OpenTelemetry resource and
	// instrumentation scope the span came from: entries of its trace's
	// Resources and Scopes, shared by the spans of one resource or scope
	// and by the traces the assembler made of the same resource, so never
	// modified (nil: none, as for Kieker and zorka spans).
	Resource *Resource
	Scope    *Scope

	afterOrder int32 // the After event's orderIndex (0: not returned yet)
}

// Resource is an OpenTelemetry resource: every attribute it was sent
// with, service.name and host.name included, in the order sent.
type Resource struct {
	Attributes []Attr
}

// Attr returns the resource's attribute key.
func (r *Resource) Attr(key string) (Attr, bool) {
	if r == nil {
		return Attr{}, false
	}
	for _, a := range r.Attributes {
		if a.Key == key {
			return a, true
		}
	}
	return Attr{}, false
}

// Equal reports whether r and o hold the same attributes in the same
// order.
func (r *Resource) Equal(o *Resource) bool {
	return r == o || r != nil && o != nil && attrsEqual(r.Attributes, o.Attributes)
}

// Scope is an OpenTelemetry instrumentation scope: its name, version and
// attributes.
type Scope struct {
	Name, Version string
	Attributes    []Attr
}

// The keys under which a span's scope name and version are searched and
// shown (OpenTelemetry's names for them in formats without scopes, such
// as Jaeger's).
const (
	ScopeNameKey    = "otel.scope.name"
	ScopeVersionKey = "otel.scope.version"
)

// Attr returns the scope's attribute key; ScopeNameKey and
// ScopeVersionKey give its name and version.
func (c *Scope) Attr(key string) (Attr, bool) {
	if c == nil {
		return Attr{}, false
	}
	for _, a := range c.Attributes {
		if a.Key == key {
			return a, true
		}
	}
	switch {
	case key == ScopeNameKey && c.Name != "":
		return Attr{Key: key, Value: c.Name, Type: TypeString}, true
	case key == ScopeVersionKey && c.Version != "":
		return Attr{Key: key, Value: c.Version, Type: TypeString}, true
	}
	return Attr{}, false
}

// Equal reports whether c and o are the same scope.
func (c *Scope) Equal(o *Scope) bool {
	return c == o || c != nil && o != nil && c.Name == o.Name && c.Version == o.Version && attrsEqual(c.Attributes, o.Attributes)
}

func attrsEqual(a, b []Attr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Duration returns End-Start.
func (s *Span) Duration() int64 { return s.End - s.Start }

// Attr returns the value of attribute key and whether the span has it:
// its own attributes first, then its resource's, then its scope's (and
// its name and version as ScopeNameKey and ScopeVersionKey), Kieker's
// positions (KiekerAttrs) included.
func (s *Span) Attr(key string) (Attr, bool) {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a, true
		}
	}
	if a, ok := s.Resource.Attr(key); ok {
		return a, true
	}
	if a, ok := s.Scope.Attr(key); ok {
		return a, true
	}
	if s.Source == FromEvents || s.Source == FromExecution {
		if _, ok := strings.CutPrefix(key, "kieker."); ok {
			for _, a := range KiekerAttrs(s) {
				if a.Key == key {
					return a, true
				}
			}
		}
	}
	return Attr{}, false
}

// Trace is an assembled trace: every span of one request, across threads,
// processes and services, as a tree (or a forest, where parents are
// missing).
type Trace struct {
	ID ID
	// Spans are in tree order: every root by start time, each followed by
	// its subtree (children by start time, then order).
	Spans []Span
	// Broken holds the reasons the trace is not sound (empty for a sound
	// trace): a missing parent, an unclosed call, a negative duration, a
	// reused order index, a part of a trace too large to hold.
	Broken []string
	// Part numbers the parts of a trace too large to hold in memory (0:
	// the whole trace; 1, 2, …: consecutive parts).
	Part int
	// Resources and Scopes are the distinct OpenTelemetry resources and
	// instrumentation scopes of the spans, in order of first appearance:
	// each span's Resource and Scope point at one of them. Traces of
	// Kieker and zorka have none.
	Resources []*Resource
	Scopes    []*Scope

	// Packed holds the spans of a trace an assembler emitted packed
	// (Options.Packed), nil once they are made (Unpack) or when they were
	// made at once. While it is set, Spans is empty and every method of
	// the trace but SpanCount and Source sees no spans: read it through
	// an Unpacker.
	Packed *PackedSpans `json:"-"`
}

// ResourceIndex returns the index of r in t.Resources (-1: nil or not
// there).
func (t *Trace) ResourceIndex(r *Resource) int {
	if r != nil {
		for i, x := range t.Resources {
			if x == r {
				return i
			}
		}
	}
	return -1
}

// ScopeIndex returns the index of c in t.Scopes (-1: nil or not there).
func (t *Trace) ScopeIndex(c *Scope) int {
	if c != nil {
		for i, x := range t.Scopes {
			if x == c {
				return i
			}
		}
	}
	return -1
}

// Start returns the earliest span start (0 without spans).
func (t *Trace) Start() int64 {
	var s int64
	for i := range t.Spans {
		if i == 0 || t.Spans[i].Start < s {
			s = t.Spans[i].Start
		}
	}
	return s
}

// End returns the latest span end.
func (t *Trace) End() int64 {
	var e int64
	for i := range t.Spans {
		if i == 0 || t.Spans[i].End > e {
			e = t.Spans[i].End
		}
	}
	return e
}

// Duration returns End-Start.
func (t *Trace) Duration() int64 { return t.End() - t.Start() }

// Hosts returns the hosts of the spans, in order of first appearance.
func (t *Trace) Hosts() []string {
	var out []string
	for i := range t.Spans {
		h := t.Spans[i].Host
		if h == "" {
			continue
		}
		dup := false
		for _, o := range out {
			if o == h {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, h)
		}
	}
	return out
}

// Root returns the first root span (the request's entry), or nil.
func (t *Trace) Root() *Span {
	for i := range t.Spans {
		if t.Spans[i].Parent < 0 {
			return &t.Spans[i]
		}
	}
	return nil
}

// TypeAttr is the root span attribute that holds a zorka trace's type,
// the trace id symbol of its TraceMarker (HTTP, JMS, SQL, EJB, …); a
// zorka trace's root also holds zorka.calls.
const TypeAttr = "trace.type"

// Name returns what lists and searches call the trace: a zorka trace's
// type (TypeAttr of a root that holds zorka.calls), as zico lists and
// searches its traces, else the root span's operation ("" without spans).
// The root span's operation stays the root method in either case.
func (t *Trace) Name() string {
	r := t.Root()
	if r == nil {
		return ""
	}
	if typ, ok := r.Attr(TypeAttr); ok && typ.Value != "" {
		if _, zorka := r.Attr("zorka.calls"); zorka {
			return typ.Value
		}
	}
	return r.Operation
}

// Errors counts the spans in error.
func (t *Trace) Errors() int {
	n := 0
	for i := range t.Spans {
		if t.Spans[i].Error {
			n++
		}
	}
	return n
}

// Children returns the indexes of the children of span i (-1: the roots),
// in tree order.
func (t *Trace) Children(i int) []int {
	var out []int
	for j := range t.Spans {
		if int(t.Spans[j].Parent) == i {
			out = append(out, j)
		}
	}
	return out
}

// ErrBadID is wrapped by errors about malformed ids.
var ErrBadID = errors.New("malformed id")

// componentOf returns the class of a Kieker operation signature such as
// "public void org.app.Shop.buy(int)" (org.app.Shop), or "" when the
// signature names none.
func componentOf(sig string) string {
	s := sig
	if i := strings.IndexByte(s, '('); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndexByte(s, '.'); i > 0 {
		return s[:i]
	}
	return ""
}
