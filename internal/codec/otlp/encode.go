package otlp

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/jsonstr"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// LinkKindAttr is the link attribute that keeps a link's kind when it is
// not an OTLP link (a Kieker split, join or remote call): its value is
// the kind's name (trace.LinkKind.String).
const LinkKindAttr = "tracebridge.link.kind"

// AppendTraceJSON appends t as OTLP/JSON (an ExportTraceServiceRequest,
// the TracesData of OTLP's file exporter; the stream's dump --format
// otlp-json writes one per line): one resourceSpans per resource, one
// scopeSpans per instrumentation scope in it, spans in the trace's tree
// order. A span's resource and scope are the ones it came with (its
// Resource and Scope, entries of t.Resources and t.Scopes: every
// attribute, the scope's name and version); a span without them (Kieker's
// and zorka's calls, OTLP spans stored before resources were kept) gets
// the resource service.name — its service, else its host, else
// trace.UnknownService —, host.name and process.pid, and the scope of its
// component (an OTLP span without code.namespace: the decoder put its
// scope there), else "tracebridge".
//
// Ids are hex, times and 64-bit integers decimal strings, enums numbers,
// as the OTLP specification asks. A span's attributes come back with
// their types (arrays and maps as arrayValue and kvlistValue); a span
// that is not OTLP's gets code.namespace (its class), thread.id and
// Kieker's positions (trace.KiekerAttrs) as attributes, the kind INTERNAL
// when it has none, a failed call the status ERROR. The result reads
// back with DecodeJSON into the same spans, resources and scopes.
func AppendTraceJSON(dst []byte, t *trace.Trace) []byte {
	// resKey is a resource: the span's own, else the one made of its
	// service, host and process.
	type resKey struct {
		res                *trace.Resource
		service, host, pid string
	}
	// scopeKey is a scope: the span's own, else the name made for it.
	type scopeKey struct {
		sc   *trace.Scope
		name string
	}
	type group struct {
		res    resKey
		scopes []scopeKey
		spans  [][]int // per scope, the span indexes
	}
	var groups []*group
	byRes := make(map[resKey]*group, len(t.Resources)+1)
	for i := range t.Spans {
		s := &t.Spans[i]
		k := resKey{res: s.Resource}
		if k.res == nil {
			k.service, k.host, k.pid = serviceName(s), s.Host, s.Process
		}
		g := byRes[k]
		if g == nil {
			g = &group{res: k}
			byRes[k] = g
			groups = append(groups, g)
		}
		sk := scopeKey{sc: s.Scope}
		if sk.sc == nil {
			sk.name = scopeName(s)
		}
		j := slices.Index(g.scopes, sk)
		if j < 0 {
			j = len(g.scopes)
			g.scopes = append(g.scopes, sk)
			g.spans = append(g.spans, nil)
		}
		g.spans[j] = append(g.spans[j], i)
	}
	tid := t.ID.Hex()
	dst = append(dst, `{"resourceSpans":[`...)
	for gi, g := range groups {
		if gi > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"resource":{`...)
		if g.res.res != nil {
			dst = appendAttrList(dst, g.res.res.Attributes)
		} else {
			dst = appendMadeResource(dst, g.res.service, g.res.host, g.res.pid)
		}
		dst = append(dst, `},"scopeSpans":[`...)
		for si, sk := range g.scopes {
			if si > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"scope":{"name":`...)
			if sc := sk.sc; sc != nil {
				dst = jsonstr.AppendString(dst, sc.Name)
				if sc.Version != "" {
					dst = append(dst, `,"version":`...)
					dst = jsonstr.AppendString(dst, sc.Version)
				}
				dst = appendAttrs(dst, sc.Attributes, nil)
			} else {
				dst = jsonstr.AppendString(dst, sk.name)
			}
			dst = append(dst, `},"spans":[`...)
			for k, i := range g.spans[si] {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = appendSpan(dst, tid, &t.Spans[i])
			}
			dst = append(dst, `]}`...)
		}
		dst = append(dst, `]}`...)
	}
	return append(dst, `]}`...)
}

// appendAttrList appends "attributes":[…].
func appendAttrList(dst []byte, as []trace.Attr) []byte {
	dst = append(dst, `"attributes":[`...)
	for i, a := range as {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendKV(dst, a)
	}
	return append(dst, ']')
}

// appendMadeResource appends "attributes":[…] of the resource of a span
// without one: service.name, host.name and process.pid (an int when it
// reads as one).
func appendMadeResource(dst []byte, service, host, pid string) []byte {
	dst = append(dst, `"attributes":[`...)
	dst = appendKV(dst, trace.Attr{Key: "service.name", Value: service, Type: trace.TypeString})
	if host != "" {
		dst = append(dst, ',')
		dst = appendKV(dst, trace.Attr{Key: "host.name", Value: host, Type: trace.TypeString})
	}
	if pid != "" {
		typ := trace.TypeString
		if _, err := strconv.ParseInt(pid, 10, 64); err == nil {
			typ = trace.TypeInt
		}
		dst = append(dst, ',')
		dst = appendKV(dst, trace.Attr{Key: "process.pid", Value: pid, Type: typ})
	}
	return append(dst, ']')
}

// serviceName is a span's service.name: its service, else its host (as
// Jaeger's API names a Kieker host's spans), else trace.UnknownService.
func serviceName(s *trace.Span) string {
	switch {
	case s.Service != "":
		return s.Service
	case s.Host != "":
		return s.Host
	}
	return trace.UnknownService
}

// scopeName is an OTLP span's instrumentation scope (its component when
// it has no code.namespace: the decoder put the scope there), and
// "tracebridge" for every other span.
func scopeName(s *trace.Span) string {
	if s.Source == trace.FromSpan {
		if _, ok := s.Attr("code.namespace"); !ok {
			return s.Component
		}
		return ""
	}
	return "tracebridge"
}

func appendSpan(dst []byte, tid string, s *trace.Span) []byte {
	dst = append(dst, `{"traceId":"`...)
	dst = append(dst, tid...)
	dst = append(dst, `","spanId":"`...)
	dst = append(dst, s.SpanID.String()...)
	dst = append(dst, '"')
	if s.ParentID != 0 {
		dst = append(dst, `,"parentSpanId":"`...)
		dst = append(dst, s.ParentID.String()...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"name":`...)
	dst = jsonstr.AppendString(dst, s.Operation)
	kind := s.Kind
	if kind == trace.KindUnspecified && s.Source != trace.FromSpan {
		kind = trace.KindInternal // a Kieker or zorka call
	}
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(kind), 10)
	dst = append(dst, `,"startTimeUnixNano":"`...)
	dst = strconv.AppendInt(dst, s.Start, 10)
	dst = append(dst, `","endTimeUnixNano":"`...)
	dst = strconv.AppendInt(dst, s.End, 10)
	dst = append(dst, `","attributes":[`...)
	n := 0
	add := func(a trace.Attr) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = appendKV(dst, a)
	}
	for _, a := range s.Attributes {
		add(a)
	}
	if s.Source != trace.FromSpan {
		has := func(k string) bool {
			return slices.ContainsFunc(s.Attributes, func(a trace.Attr) bool { return a.Key == k })
		}
		// (A component that is the span's scope's name is in the scope.)
		if s.Component != "" && !has("code.namespace") && (s.Scope == nil || s.Scope.Name != s.Component) {
			add(trace.Attr{Key: "code.namespace", Value: s.Component, Type: trace.TypeString})
		}
		if s.Thread != "" && !has("thread.id") {
			add(trace.Attr{Key: "thread.id", Value: s.Thread, Type: trace.TypeString})
		}
		for _, a := range trace.KiekerAttrs(s) {
			add(a)
		}
	}
	dst = append(dst, ']')
	if len(s.Events) > 0 {
		dst = append(dst, `,"events":[`...)
		for i, e := range s.Events {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"timeUnixNano":"`...)
			dst = strconv.AppendInt(dst, e.Time, 10)
			dst = append(dst, `","name":`...)
			dst = jsonstr.AppendString(dst, e.Name)
			dst = appendAttrs(dst, e.Attributes, nil)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(s.Links) > 0 {
		dst = append(dst, `,"links":[`...)
		for i, l := range s.Links {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"traceId":"`...)
			dst = append(dst, l.TraceID.Hex()...)
			dst = append(dst, `","spanId":"`...)
			dst = append(dst, l.SpanID.String()...)
			dst = append(dst, '"')
			if l.TraceState != "" {
				dst = append(dst, `,"traceState":`...)
				dst = jsonstr.AppendString(dst, l.TraceState)
			}
			var kind *trace.Attr
			if l.Kind != trace.LinkFollowsFrom {
				kind = &trace.Attr{Key: LinkKindAttr, Value: l.Kind.String(), Type: trace.TypeString}
			}
			dst = appendAttrs(dst, l.Attributes, kind)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	code := s.Status
	if code == trace.StatusUnset && s.Error {
		code = trace.StatusError
	}
	if code != trace.StatusUnset || s.StatusMessage != "" {
		dst = append(dst, `,"status":{"code":`...)
		dst = strconv.AppendInt(dst, int64(code), 10)
		if s.StatusMessage != "" {
			dst = append(dst, `,"message":`...)
			dst = jsonstr.AppendString(dst, s.StatusMessage)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendAttrs appends ,"attributes":[…] with as and extra (when not nil).
func appendAttrs(dst []byte, as []trace.Attr, extra *trace.Attr) []byte {
	if len(as) == 0 && extra == nil {
		return dst
	}
	dst = append(dst, `,"attributes":[`...)
	for i, a := range as {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendKV(dst, a)
	}
	if extra != nil {
		if len(as) > 0 {
			dst = append(dst, ',')
		}
		dst = appendKV(dst, *extra)
	}
	return append(dst, ']')
}

// appendKV appends a KeyValue.
func appendKV(dst []byte, a trace.Attr) []byte {
	dst = append(dst, `{"key":`...)
	dst = jsonstr.AppendString(dst, a.Key)
	dst = append(dst, `,"value":`...)
	dst = appendAnyValue(dst, a)
	return append(dst, '}')
}

// appendAnyValue appends an attribute's value as an AnyValue of its
// type; a value that does not read as its type is a string.
func appendAnyValue(dst []byte, a trace.Attr) []byte {
	switch a.Type {
	case trace.TypeBool:
		if a.Value == "true" || a.Value == "false" {
			return append(append(append(dst, `{"boolValue":`...), a.Value...), '}')
		}
	case trace.TypeInt:
		if _, err := strconv.ParseInt(a.Value, 10, 64); err == nil {
			return append(append(append(dst, `{"intValue":"`...), a.Value...), `"}`...)
		}
	case trace.TypeDouble:
		if f, err := strconv.ParseFloat(a.Value, 64); err == nil {
			return appendDouble(dst, f)
		}
	case trace.TypeBytes:
		return append(jsonstr.AppendString(append(dst, `{"bytesValue":`...), a.Value), '}')
	case trace.TypeJSON:
		d := json.NewDecoder(bytes.NewReader([]byte(a.Value)))
		d.UseNumber()
		var v any
		if d.Decode(&v) == nil {
			return appendJSONValue(dst, v)
		}
	}
	return append(jsonstr.AppendString(append(dst, `{"stringValue":`...), a.Value), '}')
}

func appendDouble(dst []byte, f float64) []byte {
	dst = append(dst, `{"doubleValue":`...)
	switch {
	case math.IsNaN(f):
		dst = append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		dst = append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		dst = append(dst, `"-Infinity"`...)
	default:
		dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
	}
	return append(dst, '}')
}

// appendJSONValue appends a value of an array or key-value list (as the
// decoder wrote it in JSON) as an AnyValue: numbers without a fraction or
// exponent that fit 64 bits are intValue, other numbers doubleValue;
// null is the empty AnyValue.
func appendJSONValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, `{}`...)
	case bool:
		return append(strconv.AppendBool(append(dst, `{"boolValue":`...), x), '}')
	case string:
		return append(jsonstr.AppendString(append(dst, `{"stringValue":`...), x), '}')
	case json.Number:
		if i, err := x.Int64(); err == nil && !strings.ContainsAny(string(x), ".eE") {
			return append(strconv.AppendInt(append(dst, `{"intValue":"`...), i, 10), `"}`...)
		}
		f, _ := x.Float64()
		return appendDouble(dst, f)
	case []any:
		dst = append(dst, `{"arrayValue":{"values":[`...)
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONValue(dst, e)
		}
		return append(dst, `]}}`...)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, `{"kvlistValue":{"values":[`...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = jsonstr.AppendString(dst, k)
			dst = append(dst, `,"value":`...)
			dst = append(appendJSONValue(dst, x[k]), '}')
		}
		return append(dst, `]}}`...)
	}
	return append(dst, `{}`...)
}
