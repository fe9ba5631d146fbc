package stream

import (
	"strconv"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// appendOTLP appends t as one OTLP/JSON ExportTraceServiceRequest and a
// newline: a resource per OpenTelemetry resource of its spans (every
// attribute), else per (service, host) with service.name and host.name;
// in each, a scope per instrumentation scope of its spans (name, version,
// attributes), else the scope "tracebridge"; ids in hex, 64-bit integers
// as strings, enums as numbers (OTLP's JSON mapping).
func appendOTLP(dst []byte, t *trace.Trace) []byte {
	type resource struct {
		res           *trace.Resource
		service, host string
	}
	type group struct {
		scopes []*trace.Scope
		spans  map[*trace.Scope][]int
	}
	var order []resource
	groups := map[resource]*group{}
	for i := range t.Spans {
		s := &t.Spans[i]
		r := resource{res: s.Resource}
		if r.res == nil {
			r.service, r.host = s.Service, s.Host
		}
		g, ok := groups[r]
		if !ok {
			g = &group{spans: map[*trace.Scope][]int{}}
			groups[r] = g
			order = append(order, r)
		}
		if _, ok := g.spans[s.Scope]; !ok {
			g.scopes = append(g.scopes, s.Scope)
		}
		g.spans[s.Scope] = append(g.spans[s.Scope], i)
	}
	dst = append(dst, `{"resourceSpans":[`...)
	for ri, r := range order {
		if ri > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"resource":{"attributes":[`...)
		attrs := []trace.Attr{{Key: "service.name", Value: r.service, Type: trace.TypeString}, {Key: "host.name", Value: r.host, Type: trace.TypeString}}
		if r.res != nil {
			attrs = r.res.Attributes
		}
		n := 0
		for _, a := range attrs {
			if a.Value == "" && r.res == nil {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = appendAttr(dst, a)
		}
		dst = append(dst, `]},"scopeSpans":[`...)
		g := groups[r]
		for si, sc := range g.scopes {
			if si > 0 {
				dst = append(dst, ',')
			}
			if sc == nil {
				dst = append(dst, `{"scope":{"name":"tracebridge"},"spans":[`...)
			} else {
				dst = append(dst, `{"scope":{"name":`...)
				dst = jsonl.AppendString(dst, sc.Name)
				if sc.Version != "" {
					dst = append(dst, `,"version":`...)
					dst = jsonl.AppendString(dst, sc.Version)
				}
				dst = append(dst, `,"attributes":[`...)
				for j, a := range sc.Attributes {
					if j > 0 {
						dst = append(dst, ',')
					}
					dst = appendAttr(dst, a)
				}
				dst = append(dst, `]},"spans":[`...)
			}
			for k, i := range g.spans[sc] {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = appendSpan(dst, t, &t.Spans[i])
			}
			dst = append(dst, `]}`...)
		}
		dst = append(dst, `]}`...)
	}
	return append(dst, "]}\n"...)
}

func appendSpan(dst []byte, t *trace.Trace, s *trace.Span) []byte {
	dst = append(dst, `{"traceId":"`...)
	dst = append(dst, t.ID.Hex()...)
	dst = append(dst, `","spanId":"`...)
	dst = append(dst, s.SpanID.String()...)
	dst = append(dst, '"')
	if s.ParentID != 0 {
		dst = append(dst, `,"parentSpanId":"`...)
		dst = append(dst, s.ParentID.String()...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"name":`...)
	dst = jsonl.AppendString(dst, s.Operation)
	kind := s.Kind
	if kind == trace.KindUnspecified {
		kind = trace.KindInternal
	}
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(kind), 10)
	dst = append(dst, `,"startTimeUnixNano":"`...)
	dst = strconv.AppendInt(dst, s.Start, 10)
	dst = append(dst, `","endTimeUnixNano":"`...)
	dst = strconv.AppendInt(dst, s.End, 10)
	dst = append(dst, `","attributes":[`...)
	attrs := s.Attributes
	extra := [...]trace.Attr{
		{Key: "code.namespace", Value: s.Component, Type: trace.TypeString},
		{Key: "thread.id", Value: s.Thread, Type: trace.TypeString},
		{Key: "process.pid", Value: s.Process, Type: trace.TypeString},
	}
	n := 0
	for _, a := range extra {
		if a.Value == "" || a.Key == "code.namespace" && s.Scope != nil && a.Value == s.Scope.Name {
			// (A component that is the scope's name is in the scope.)
			continue
		}
		if _, dup := s.Attr(a.Key); dup {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = appendAttr(dst, a)
	}
	for _, a := range attrs {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = appendAttr(dst, a)
	}
	dst = append(dst, `],"events":[`...)
	for i, e := range s.Events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"timeUnixNano":"`...)
		dst = strconv.AppendInt(dst, e.Time, 10)
		dst = append(dst, `","name":`...)
		dst = jsonl.AppendString(dst, e.Name)
		dst = append(dst, `,"attributes":[`...)
		for j, a := range e.Attributes {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendAttr(dst, a)
		}
		dst = append(dst, "]}"...)
	}
	dst = append(dst, `],"links":[`...)
	for i, l := range s.Links {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"traceId":"`...)
		dst = append(dst, l.TraceID.Hex()...)
		dst = append(dst, `","spanId":"`...)
		dst = append(dst, l.SpanID.String()...)
		dst = append(dst, `","traceState":`...)
		dst = jsonl.AppendString(dst, l.TraceState)
		dst = append(dst, `,"attributes":[`...)
		for j, a := range l.Attributes {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendAttr(dst, a)
		}
		dst = append(dst, "]}"...)
	}
	dst = append(dst, `],"status":{`...)
	code := s.Status
	if s.Error {
		code = trace.StatusError
	}
	if code != trace.StatusUnset {
		dst = append(dst, `"code":`...)
		dst = strconv.AppendInt(dst, int64(code), 10)
		if s.StatusMessage != "" {
			dst = append(dst, `,"message":`...)
			dst = jsonl.AppendString(dst, s.StatusMessage)
		}
	}
	return append(dst, "}}"...)
}

// appendAttr writes one KeyValue; values keep their type where OTLP has
// it (arrays and maps, kept as JSON text in the trace model, become
// strings).
func appendAttr(dst []byte, a trace.Attr) []byte {
	dst = append(dst, `{"key":`...)
	dst = jsonl.AppendString(dst, a.Key)
	dst = append(dst, `,"value":{`...)
	switch a.Type {
	case trace.TypeBool:
		if a.Value == "true" || a.Value == "false" {
			dst = append(dst, `"boolValue":`...)
			dst = append(dst, a.Value...)
			return append(dst, "}}"...)
		}
	case trace.TypeInt:
		if _, err := strconv.ParseInt(a.Value, 10, 64); err == nil {
			dst = append(dst, `"intValue":"`...)
			dst = append(dst, a.Value...)
			return append(dst, `"}}`...)
		}
	case trace.TypeDouble:
		if f, err := strconv.ParseFloat(a.Value, 64); err == nil {
			dst = append(dst, `"doubleValue":`...)
			dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
			return append(dst, "}}"...)
		}
	case trace.TypeBytes:
		dst = append(dst, `"bytesValue":`...)
		dst = jsonl.AppendString(dst, a.Value)
		return append(dst, "}}"...)
	}
	dst = append(dst, `"stringValue":`...)
	dst = jsonl.AppendString(dst, a.Value)
	return append(dst, "}}"...)
}
