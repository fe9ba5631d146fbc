package trace

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/record"
)

// SpanTypeName is the record type that carries spans through the pipeline
// (OTLP spans, zorka trace records, spans of our own clients): spans flow
// as records like every other, so every sink handles them, and the
// assembler builds traces of them. Its fields, in order, are the Span*
// field indexes below; every value lives in the batch's arena, so a
// decoder fills spans without allocating per span.
const SpanTypeName = "tracebridge.trace.SpanRecord"

// Field indexes of SpanType.
const (
	SpanTraceIDHigh    = iota // long: high 64 bits of the 128-bit trace id
	SpanTraceIDLow            // long: low 64 bits
	SpanSpanID                // long
	SpanParentID              // long: 0 for a root span
	SpanName                  // string: the operation (OTLP span name)
	SpanService               // string: service.name
	SpanHost                  // string: host.name, else the service
	SpanStart                 // long: start, epoch ns
	SpanEnd                   // long: end, epoch ns
	SpanKind                  // byte: OTLP SpanKind (0–5)
	SpanStatus                // byte: 0 unset, 1 ok, 2 error
	SpanStatusMessage         // string
	SpanScope                 // string: instrumentation scope name
	SpanComponent             // string: class or code.namespace ("" if none)
	SpanThread                // string: thread.id or thread.name ("" if none)
	SpanProcess               // string: process.pid ("" if none)
	SpanAttributes            // string[]: key, value, key, value, … (values as text, see ValueType)
	SpanAttributeTypes        // byte[]: the ValueType of each pair
	SpanResource              // string[]: the resource's attributes, key, value, …; then the scope's (see below)
	SpanResourceTypes         // byte[]: the ValueType of each pair; ScopeMark marks where the scope's begin
	SpanEvents                // string[]: name, time (decimal epoch ns), attributes (JSON object), … per event
	SpanLinks                 // string[]: trace id (hex), span id (hex), trace state, attributes (JSON), … per link
	SpanTraceState            // string: W3C tracestate
	SpanFlags                 // int: OTLP span flags
	spanFields
)

// ScopeMark is the type, in a span record's resourceTypes, of the pair
// (ScopeVersionKey, the scope's version) that ends the resource's
// attributes: the pairs after it are the instrumentation scope's
// attributes. The resource list thus holds every attribute of the span's
// resource (service.name, host.name and process.pid too, which also have
// fields of their own), then, when the scope has a version or
// attributes, the mark and the scope's attributes; the scope's name is
// the scope field. A decoder shares one list among the spans of a
// resource and scope.
const ScopeMark = 0

// FlagComplete, set in a span record's flags, says the batch holds the
// whole trace (a zorka agent sends whole traces): the assembler completes
// it at the end of the batch instead of waiting for its window, so that a
// receiver that answers only once its data is stored is not held up.
const FlagComplete = 1 << 30

// SpanType is the record type of SpanTypeName.
var SpanType = record.MustType(SpanTypeName,
	record.Field{Name: "traceIdHigh", Kind: record.Long},
	record.Field{Name: "traceIdLow", Kind: record.Long},
	record.Field{Name: "spanId", Kind: record.Long},
	record.Field{Name: "parentSpanId", Kind: record.Long},
	record.Field{Name: "name", Kind: record.String},
	record.Field{Name: "service", Kind: record.String},
	record.Field{Name: "hostname", Kind: record.String},
	record.Field{Name: "startTimeUnixNano", Kind: record.Long},
	record.Field{Name: "endTimeUnixNano", Kind: record.Long},
	record.Field{Name: "kind", Kind: record.Byte},
	record.Field{Name: "statusCode", Kind: record.Byte},
	record.Field{Name: "statusMessage", Kind: record.String},
	record.Field{Name: "scope", Kind: record.String},
	record.Field{Name: "component", Kind: record.String},
	record.Field{Name: "thread", Kind: record.String},
	record.Field{Name: "process", Kind: record.String},
	record.Field{Name: "attributes", Kind: record.String, Array: true},
	record.Field{Name: "attributeTypes", Kind: record.Byte, Array: true},
	record.Field{Name: "resource", Kind: record.String, Array: true},
	record.Field{Name: "resourceTypes", Kind: record.Byte, Array: true},
	record.Field{Name: "events", Kind: record.String, Array: true},
	record.Field{Name: "links", Kind: record.String, Array: true},
	record.Field{Name: "traceState", Kind: record.String},
	record.Field{Name: "flags", Kind: record.Int},
)

// SpanIRL describes SpanType in Kieker's record language, for logs and
// tools that read IRL.
const SpanIRL = `package tracebridge.trace

entity SpanRecord {
	long traceIdHigh
	long traceIdLow
	long spanId
	long parentSpanId
	string name
	string service
	string hostname
	long startTimeUnixNano
	long endTimeUnixNano
	byte kind
	byte statusCode
	string statusMessage
	string scope
	string component
	string thread
	string process
	string[] attributes
	byte[] attributeTypes
	string[] resource
	byte[] resourceTypes
	string[] events
	string[] links
	string traceState
	int flags
}
`

// AddTypes adds tracebridge's own record types (SpanType,
// InvocationType) to cat.
func AddTypes(cat *record.Catalog) error {
	if err := cat.Add(SpanType); err != nil {
		return err
	}
	return cat.Add(InvocationType)
}

// Types returns a catalogue of Kieker's built-in types and tracebridge's
// own.
func Types() *record.Catalog {
	cat := record.Builtin()
	if err := AddTypes(cat); err != nil {
		panic(err) // the built-in catalogue cannot conflict with SpanType
	}
	return cat
}

// AppendSpan adds s of trace id to b as a span record. Strings are shared;
// attributes, events and links are encoded into the batch's arena (events
// and links as JSON, which allocates: they are rare).
func AppendSpan(b *record.Batch, id ID, s *Span) {
	r := b.Add(SpanType, record.NoTimestamp)
	v := r.Values
	v[SpanTraceIDHigh] = record.IntValue(int64(id.Hi))
	v[SpanTraceIDLow] = record.IntValue(int64(id.Lo))
	v[SpanSpanID] = record.IntValue(int64(s.SpanID))
	v[SpanParentID] = record.IntValue(int64(s.ParentID))
	v[SpanName] = record.StringValue(s.Operation)
	v[SpanService] = record.StringValue(s.Service)
	v[SpanHost] = record.StringValue(s.Host)
	v[SpanStart] = record.IntValue(s.Start)
	v[SpanEnd] = record.IntValue(s.End)
	v[SpanKind] = record.IntValue(int64(s.Kind))
	status := s.Status
	if s.Error {
		status = StatusError
	}
	v[SpanStatus] = record.IntValue(int64(status))
	v[SpanStatusMessage] = record.StringValue(s.StatusMessage)
	v[SpanComponent] = record.StringValue(s.Component)
	v[SpanThread] = record.StringValue(s.Thread)
	v[SpanProcess] = record.StringValue(s.Process)
	attrs := b.NewList(record.String, 2*len(s.Attributes))
	types := b.NewList(record.Byte, len(s.Attributes))
	for i, a := range s.Attributes {
		attrs.List().Items[2*i] = record.StringValue(a.Key)
		attrs.List().Items[2*i+1] = record.StringValue(a.Value)
		types.List().Items[i] = record.IntValue(int64(a.Type))
	}
	v[SpanAttributes], v[SpanAttributeTypes] = attrs, types
	v[SpanResource], v[SpanResourceTypes] = appendOrigin(b, s.Resource, s.Scope)
	if s.Scope != nil {
		v[SpanScope] = record.StringValue(s.Scope.Name)
	}
	events := b.NewList(record.String, 3*len(s.Events))
	for i, e := range s.Events {
		events.List().Items[3*i] = record.StringValue(e.Name)
		events.List().Items[3*i+1] = record.StringValue(strconv.FormatInt(e.Time, 10))
		events.List().Items[3*i+2] = record.StringValue(AttrsJSON(e.Attributes))
	}
	v[SpanEvents] = events
	links := b.NewList(record.String, 4*len(s.Links))
	for i, l := range s.Links {
		links.List().Items[4*i] = record.StringValue(l.TraceID.Hex())
		links.List().Items[4*i+1] = record.StringValue(l.SpanID.String())
		links.List().Items[4*i+2] = record.StringValue(l.TraceState)
		links.List().Items[4*i+3] = record.StringValue(AttrsJSON(l.Attributes))
	}
	v[SpanLinks] = links
}

// IsComplete reports whether a span record carries FlagComplete.
func IsComplete(r *record.Record) bool {
	return len(r.Values) == spanFields && r.Values[SpanFlags].Int()&FlagComplete != 0
}

// spanRecord reads a span record into s and returns its trace id. It
// reports false when the record does not have SpanType's layout.
func spanRecord(r *record.Record, s *Span, lean bool) (ID, bool) {
	if r.Type != SpanType && (r.Type.Name != SpanTypeName || !r.Type.SameFields(SpanType)) || len(r.Values) != spanFields {
		return ID{}, false
	}
	v := r.Values
	id := ID{Hi: uint64(v[SpanTraceIDHigh].Int()), Lo: uint64(v[SpanTraceIDLow].Int())}
	*s = Span{
		SpanID:        SpanID(v[SpanSpanID].Int()),
		ParentID:      SpanID(v[SpanParentID].Int()),
		Operation:     v[SpanName].Str(),
		Service:       v[SpanService].Str(),
		Host:          v[SpanHost].Str(),
		Start:         v[SpanStart].Int(),
		End:           v[SpanEnd].Int(),
		Kind:          Kind(v[SpanKind].Int()),
		Status:        Status(v[SpanStatus].Int()),
		StatusMessage: v[SpanStatusMessage].Str(),
		Component:     v[SpanComponent].Str(),
		Thread:        v[SpanThread].Str(),
		Process:       v[SpanProcess].Str(),
		OrderIndex:    -1, EOI: -1, ESS: -1,
		Source: FromSpan,
	}
	s.Error = s.Status == StatusError
	if s.Host == "" {
		s.Host = s.Service
	}
	if s.Component == "" {
		s.Component = v[SpanScope].Str()
	}
	if lean {
		return id, true
	}
	s.Attributes = pairs(v[SpanAttributes], v[SpanAttributeTypes])
	if l := v[SpanEvents].List(); l != nil {
		for i := 0; i+2 < len(l.Items); i += 3 {
			t, _ := strconv.ParseInt(l.Items[i+1].Str(), 10, 64)
			s.Events = append(s.Events, Event{Name: l.Items[i].Str(), Time: t, Attributes: ParseAttrsJSON(l.Items[i+2].Str())})
		}
	}
	if l := v[SpanLinks].List(); l != nil {
		for i := 0; i+3 < len(l.Items); i += 4 {
			tid, err1 := ParseID(l.Items[i].Str())
			sid, err2 := ParseSpanID(l.Items[i+1].Str())
			if err1 != nil || err2 != nil {
				continue
			}
			s.Links = append(s.Links, Link{TraceID: tid, SpanID: sid, TraceState: l.Items[i+2].Str(), Attributes: ParseAttrsJSON(l.Items[i+3].Str())})
		}
	}
	return id, true
}

// pairs decodes a key/value list and its types.
func pairs(kv, types record.Value) []Attr {
	l := kv.List()
	if l == nil || len(l.Items) < 2 {
		return nil
	}
	var ts []record.Value
	if t := types.List(); t != nil {
		ts = t.Items
	}
	return pairItems(l.Items, ts)
}

// pairItems decodes key/value items and their types.
func pairItems(kv, ts []record.Value) []Attr {
	if len(kv) < 2 {
		return nil
	}
	out := make([]Attr, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Attr{Key: kv[i].Str(), Value: kv[i+1].Str(), Type: pairType(ts, i/2)})
	}
	return out
}

// pairType returns the type of pair j (TypeString when unknown).
func pairType(ts []record.Value, j int) ValueType {
	if j < len(ts) && ts[j].Int() >= int64(TypeString) && ts[j].Int() <= int64(TypeJSON) {
		return ValueType(ts[j].Int())
	}
	return TypeString
}

// origin is the resource and scope of a span record, as items of its
// lists (no copies).
type origin struct {
	res, resTypes     []record.Value
	scope, scopeTypes []record.Value
	scopeName         string
	scopeVersion      string
	hasScope          bool
}

// originOf splits the resource list of span record values v.
func originOf(v []record.Value) origin {
	var o origin
	if l := v[SpanResource].List(); l != nil {
		o.res = l.Items[:len(l.Items)&^1]
	}
	if l := v[SpanResourceTypes].List(); l != nil {
		o.resTypes = l.Items
	}
	o.scopeName = v[SpanScope].Str()
	for j := 0; 2*j < len(o.res); j++ {
		if j < len(o.resTypes) && o.resTypes[j].Int() == ScopeMark {
			o.scopeVersion = o.res[2*j+1].Str()
			o.scope, o.res = o.res[2*j+2:], o.res[:2*j]
			o.scopeTypes, o.resTypes = o.resTypes[j+1:], o.resTypes[:j]
			o.hasScope = true
			break
		}
	}
	o.hasScope = o.hasScope || o.scopeName != ""
	return o
}

// itemsEqual reports whether key/value items and their types hold as.
func itemsEqual(kv, ts []record.Value, as []Attr) bool {
	if len(kv) != 2*len(as) {
		return false
	}
	for i := range as {
		if as[i].Key != kv[2*i].Str() || as[i].Value != kv[2*i+1].Str() || as[i].Type != pairType(ts, i) {
			return false
		}
	}
	return true
}

// resourceIs reports whether r is o's resource (nil: none).
func (o *origin) resourceIs(r *Resource) bool {
	if r == nil {
		return len(o.res) == 0
	}
	return itemsEqual(o.res, o.resTypes, r.Attributes)
}

// scopeIs reports whether c is o's scope (nil: none).
func (o *origin) scopeIs(c *Scope) bool {
	if c == nil {
		return !o.hasScope
	}
	return o.hasScope && c.Name == o.scopeName && c.Version == o.scopeVersion && itemsEqual(o.scope, o.scopeTypes, c.Attributes)
}

// resource returns a copy of o's resource (nil: none).
func (o *origin) resource() *Resource {
	if len(o.res) == 0 {
		return nil
	}
	return &Resource{Attributes: pairItems(o.res, o.resTypes)}
}

// scopeCopy returns a copy of o's scope (nil: none).
func (o *origin) scopeCopy() *Scope {
	if !o.hasScope {
		return nil
	}
	return &Scope{Name: o.scopeName, Version: o.scopeVersion, Attributes: pairItems(o.scope, o.scopeTypes)}
}

// appendOrigin returns the resource list of a span record of res and sc.
func appendOrigin(b *record.Batch, res *Resource, sc *Scope) (record.Value, record.Value) {
	var ras []Attr
	if res != nil {
		ras = res.Attributes
	}
	n := len(ras)
	if sc != nil && (sc.Version != "" || len(sc.Attributes) > 0) {
		n += 1 + len(sc.Attributes)
	}
	kv, types := b.NewList(record.String, 2*n), b.NewList(record.Byte, n)
	items, ts := kv.List().Items, types.List().Items
	put := func(j int, a Attr) {
		items[2*j], items[2*j+1], ts[j] = record.StringValue(a.Key), record.StringValue(a.Value), record.IntValue(int64(a.Type))
	}
	for j, a := range ras {
		put(j, a)
	}
	if n > len(ras) {
		put(len(ras), Attr{Key: ScopeVersionKey, Value: sc.Version, Type: ScopeMark})
		for j, a := range sc.Attributes {
			put(len(ras)+1+j, a)
		}
	}
	return kv, types
}

// ResourceAttrs returns the resource attributes of a span record (nil for
// another record).
func ResourceAttrs(r *record.Record) []Attr {
	if r.Type.Name != SpanTypeName || len(r.Values) != spanFields {
		return nil
	}
	o := originOf(r.Values)
	return pairItems(o.res, o.resTypes)
}

// ScopeOf returns the instrumentation scope of a span record (nil for
// another record, or a span without a scope).
func ScopeOf(r *record.Record) *Scope {
	if r.Type.Name != SpanTypeName || len(r.Values) != spanFields {
		return nil
	}
	o := originOf(r.Values)
	return o.scopeCopy()
}

// AttrsJSON encodes attributes as a JSON object: strings, JSON (arrays,
// maps) and numbers as they are typed, bytes as base64 strings. Ints are
// numbers however large: this is the span record's form, which
// ParseAttrsJSON reads back with its types (what JavaScript reads is
// attrsJSON's safe form).
func AttrsJSON(as []Attr) string { return attrsJSON(as, false) }

func attrsJSON(as []Attr, safe bool) string {
	if len(as) == 0 {
		return "{}"
	}
	m := make(map[string]json.RawMessage, len(as))
	for _, a := range as {
		m[a.Key] = attrJSON(a, safe)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// MaxSafeInt is JavaScript's Number.MAX_SAFE_INTEGER, 2^53−1: a JSON
// reader that reads numbers as doubles (browsers, Grafana, Jaeger's UI)
// rounds an integer beyond ±MaxSafeInt.
const MaxSafeInt = 1<<53 - 1

// AttrJSON returns the JSON form of a's value for JSON readers: an int
// beyond ±MaxSafeInt is a string of its decimal digits (a Kieker traceId
// such as 4658150164341456896 would be rounded as a number), as Jaeger
// sends such an int64.
func AttrJSON(a Attr) json.RawMessage { return attrJSON(a, true) }

// attrJSON is AttrJSON; with safe false ints stay numbers however large.
func attrJSON(a Attr, safe bool) json.RawMessage {
	switch a.Type {
	case TypeBool:
		if a.Value == "true" || a.Value == "false" {
			return json.RawMessage(a.Value)
		}
	case TypeInt:
		if v, err := strconv.ParseInt(a.Value, 10, 64); err == nil {
			if safe && (v > MaxSafeInt || v < -MaxSafeInt) {
				return json.RawMessage(strconv.Quote(a.Value))
			}
			return json.RawMessage(a.Value)
		}
	case TypeDouble:
		if f, err := strconv.ParseFloat(a.Value, 64); err == nil && !isInfNaN(f) {
			return json.RawMessage(a.Value)
		}
	case TypeJSON:
		if json.Valid([]byte(a.Value)) {
			return json.RawMessage(a.Value)
		}
	}
	b, _ := json.Marshal(a.Value)
	return b
}

func isInfNaN(f float64) bool {
	return f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308
}

// appendAttrsJSON appends what ParseAttrsJSON returns of s to dst (in
// place for what AttrsJSON writes of plain attributes).
func appendAttrsJSON(dst []Attr, s string) []Attr {
	if s == "" || s == "{}" {
		return dst
	}
	if out, ok := appendFlatAttrsJSON(dst, s); ok {
		return out
	}
	return append(dst, objectAttrsJSON(s)...)
}

// ParseAttrsJSON decodes what AttrsJSON wrote (keys sorted).
func ParseAttrsJSON(s string) []Attr {
	if s == "" || s == "{}" {
		return nil
	}
	if as, ok := appendFlatAttrsJSON(nil, s); ok {
		return as
	}
	return objectAttrsJSON(s)
}

// objectAttrsJSON decodes a JSON object of attributes through
// encoding/json (what appendFlatAttrsJSON does not read), keys sorted.
func objectAttrsJSON(s string) []Attr {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil
	}
	out := make([]Attr, 0, len(m))
	for k, raw := range m {
		out = append(out, attrFromJSON(k, raw))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func attrFromJSON(k string, raw json.RawMessage) Attr {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return Attr{Key: k, Value: string(raw), Type: TypeString}
	}
	switch x := v.(type) {
	case string:
		return Attr{Key: k, Value: x, Type: TypeString}
	case bool:
		return Attr{Key: k, Value: strconv.FormatBool(x), Type: TypeBool}
	case float64:
		s := string(raw)
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return Attr{Key: k, Value: s, Type: TypeInt}
		}
		return Attr{Key: k, Value: s, Type: TypeDouble}
	}
	return Attr{Key: k, Value: string(raw), Type: TypeJSON}
}

// String renders a span for messages.
func (s *Span) String() string {
	return fmt.Sprintf("%s %s [%d, %d]", s.SpanID, s.Operation, s.Start, s.End)
}
