package zico

import (
	"strconv"

	"github.com/tracebridge/tracebridge/internal/codec/fressian"
)

// The struct tags of zorka's records (Z FressianTraceFormat).
const (
	TagHello        = "com.jitlogic.zorka.HelloRequest_v1"
	TagSymbol       = "com.jitlogic.zorka.Symbol_v1"
	TagRecord       = "com.jitlogic.zorka.TraceRecord_v1"
	TagMarker       = "com.jitlogic.zorka.TraceMarker_v1"
	TagException    = "com.jitlogic.zorka.SymbolicException_v1"
	TagStackElement = "com.jitlogic.zorka.SymbolicStackElement_v1"
	TagTagged       = "com.jitlogic.zorka.TaggedValue_v1"
	TagPerfRecord   = "com.jitlogic.zorka.PerfRecord_v1"
	TagPerfSample   = "com.jitlogic.zorka.PerfSample_v1"
	TagMetric       = "com.jitlogic.zorka.Metric_v1"
	TagTemplate     = "com.jitlogic.zorka.MetricTemplate_v1"
)

// fieldCounts are the fields zorka's Java read handlers read, whatever
// the count declared on the wire (Metric_v1 declares 4 and has 6,
// MetricTemplate_v1 declares 8 and has 9).
var fieldCounts = map[string]int{
	TagHello: 3, TagSymbol: 2, TagRecord: 11, TagMarker: 4, TagException: 4,
	TagStackElement: 4, TagTagged: 2, TagPerfRecord: 3, TagPerfSample: 3,
	TagMetric: 6, TagTemplate: 9,
}

// FieldCount is the fressian.Options.FieldCount of zorka's records: the
// number of fields that follow a struct with the tag, as Java's reader with
// zorka's handlers reads it.
func FieldCount(tag string, declared int) int {
	if n, ok := fieldCounts[tag]; ok {
		return n
	}
	return declared
}

// TraceRecord flags (TraceRecord.Flags).
const (
	FlagOverflow      = 0x01 // children were dropped (the trace hit the agent's record limit)
	FlagTraceBegin    = 0x02 // a trace begins here: the record carries a marker
	FlagExceptionPass = 0x04 // the call rethrew its last child's exception (and holds none itself)
	FlagExceptionWrap = 0x08 // the call wrapped its child's exception
	FlagDroppedParent = 0x10 // the parent call was dropped as too short
)

// TraceMarker flags (TraceMarker.Flags).
const (
	MarkerOverflow    = 0x01   // records of the trace were dropped
	MarkerSubmit      = 0x02   // submitted regardless of its time
	MarkerAllMethods  = 0x04   // every method recorded
	MarkerDropInterim = 0x08   // short interim calls dropped
	MarkerTraceCalls  = 0x10   // calls logged
	MarkerDropTrace   = 0x20   // dropped regardless of its time
	MarkerError       = 0x1000 // the trace ended with an error (exception or e.g. HTTP 500)
)

// Object is what DecodeData yields: *Symbol, *Trace (a TraceRecord at the
// top level of a payload), *TraceMarker, *HelloRequest or *Unknown.
type Object interface{ object() }

func (*Symbol) object()       {}
func (*Trace) object()        {}
func (*TraceMarker) object()  {}
func (*HelloRequest) object() {}
func (*Unknown) object()      {}

// HelloRequest opens a session (HelloRequest_v1).
type HelloRequest struct {
	Time     int64  // agent wall clock, ms since the epoch
	Hostname string // agent's host name; "" when null
	Auth     string // shared secret; "" when null
}

// Symbol maps an agent's symbol id to its name (Symbol_v1). Ids are
// agent-wide, start at 1, and are announced once per connection before
// their first use; 0 is announced as "<null>" when used.
type Symbol struct {
	ID   int32
	Name string // "" when null
}

// Unknown is any other top-level object (PerfRecord_v1, Metric_v1, a bare
// value, …): zico logs and ignores them.
type Unknown struct {
	Kind fressian.Kind
	Tag  string // the tag of a struct
}

// Trace is a TraceRecord at the top level of a DATA payload: one trace
// (or a part of one) as the agent submitted it.
type Trace struct {
	Root *TraceRecord
	// Records is the number of records in the tree.
	Records int
	// Unresolved counts the symbol ids of the tree (in records, markers,
	// exceptions, stack elements, attribute keys and tagged values) that
	// no Symbol announced on the connection: their names are "". Zico
	// maps them to its symbol 0.
	Unresolved int
}

// TraceMarker marks the beginning of a trace (TraceMarker_v1).
type TraceMarker struct {
	TraceID   int32  // symbol id of the trace type ("HTTP", "EJB", …)
	TraceType string // its name (resolved)
	// Clock is the wall clock when the trace began, ms since the epoch.
	Clock int64
	// MinimumTime is the agent's threshold for submitting it, ns.
	MinimumTime int64
	Flags       int32 // Marker… flags
}

// TraceRecord is one method call (TraceRecord_v1). Ids are the agent's
// symbol ids; the names beside them are resolved through the connection's
// symbols ("" when unknown or when decoded without a SymbolMap).
type TraceRecord struct {
	ClassID, MethodID, SignatureID int32
	Class, Method, Signature       string

	Flags int32 // Flag… bits
	// Time is the duration of the call, ns.
	Time int64
	// Calls is 1 plus the calls of the children (all recorded calls
	// below, including dropped ones); Errors is 1 if this call threw,
	// plus the errors of the children.
	Calls, Errors int64

	// Marker is set when a trace begins here (FlagTraceBegin).
	Marker *TraceMarker
	// Exception is what this call threw, if it was recorded here.
	Exception *Exception
	// Attrs are the attributes the agent captured, in the order it sent
	// them. nil is a null map on the wire.
	Attrs []Attr
	// Children are the calls made by this call, in call order. nil is a
	// null list on the wire.
	Children []TraceRecord
}

// Attr is one attribute of a record: a symbol id as key, a typed value.
type Attr struct {
	KeyID int32
	Key   string // the name of KeyID (resolved)
	Value Value
}

// Exception is a recorded exception (SymbolicException_v1).
type Exception struct {
	ClassID int32
	Class   string // the name of ClassID (resolved)
	Message string // "" when null
	Stack   []StackElement
	Cause   *Exception
}

// StackElement is one frame of an exception's stack trace
// (SymbolicStackElement_v1).
type StackElement struct {
	ClassID, MethodID, FileID int32
	Class, Method, File       string // resolved; File is "<null>" (symbol 0) when unknown
	// Line is the line number: -1 unknown, -2 a native method.
	Line int32
}

// Kind is the type of an attribute value.
type Kind uint8

// The kinds of attribute values.
const (
	KindNull   Kind = iota
	KindBool        // Int: 1 true, 0 false
	KindInt         // Int
	KindFloat       // Float (a Java float)
	KindDouble      // Float
	KindString      // Str
	KindTagged      // TaggedValue_v1: Int is the tag's symbol id, Str its name, Elem the value
	KindOther       // anything else (a list, map, byte array, struct …): Other
)

var kindNames = [...]string{"null", "bool", "int", "float", "double", "string", "tagged", "other"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is an attribute value. Only the fields of its Kind are set.
type Value struct {
	Kind  Kind
	Int   int64
	Float float64
	Str   string
	Elem  *Value
	Other *fressian.Value
}

// String formats the value for humans (and full-text search): strings
// as they are, numbers in Go's shortest form, a tagged value as
// tag:value.
func (v Value) String() string {
	switch v.Kind {
	case KindNull:
		return "null"
	case KindBool:
		return strconv.FormatBool(v.Int != 0)
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindFloat:
		return strconv.FormatFloat(v.Float, 'g', -1, 32)
	case KindDouble:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case KindString:
		return v.Str
	case KindTagged:
		if v.Elem == nil {
			return v.Str + ":null"
		}
		return v.Str + ":" + v.Elem.String()
	case KindOther:
		if v.Other != nil {
			return v.Other.String()
		}
	}
	return ""
}

// Operation returns the record's method as class.method followed by the
// JVM signature, e.g. "com.acme.Shop.buy(Ljava/lang/String;)V".
func (r *TraceRecord) Operation() string {
	return r.Class + "." + r.Method + r.Signature
}

// Threw reports whether the call ended with an exception: one recorded
// here, or its last child's rethrown (FlagExceptionPass).
func (r *TraceRecord) Threw() bool {
	return r.Exception != nil || r.Flags&FlagExceptionPass != 0
}

// FindException returns the exception the call threw: its own, or for
// FlagExceptionPass the one its last child threw (recursively), as zico
// finds it. nil if none was recorded.
func (r *TraceRecord) FindException() *Exception {
	for r != nil {
		if r.Exception != nil {
			return r.Exception
		}
		if r.Flags&FlagExceptionPass == 0 || len(r.Children) == 0 {
			return nil
		}
		r = &r.Children[len(r.Children)-1]
	}
	return nil
}

// Walk calls fn for r and every record below it, depth first in call
// order, with the depth (0 for r); it stops descending below a record for
// which fn returns false.
func (r *TraceRecord) Walk(fn func(rec *TraceRecord, depth int) bool) {
	r.walk(fn, 0)
}

func (r *TraceRecord) walk(fn func(*TraceRecord, int) bool, depth int) {
	if !fn(r, depth) {
		return
	}
	for i := range r.Children {
		r.Children[i].walk(fn, depth+1)
	}
}
