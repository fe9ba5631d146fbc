package trace

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/jsonstr"
)

// AppendJSON appends t as one JSON object (no newline):
//
//	{"traceId":"…","start":ns,"end":ns,"durationNs":n,"hosts":[…],
//	 "resources":[{"attributes":{…}}],
//	 "scopes":[{"name":"…","version":"…","attributes":{…}}],
//	 "spans":[{"spanId":"…","parentSpanId":"…"|null,"operation":"…",
//	   "component":"…","host":"…","service":"…","thread":"…","start":ns,
//	   "end":ns,"error":bool,"kind":"…","resource":i,"scope":i,
//	   "attributes":{…},"links":[…],"events":[…]}],"broken":[…]}
//
// resources and scopes (OpenTelemetry's, each once; absent when the
// trace has none, as Kieker's and zorka's) are the trace's tables: a
// span's resource and scope are indexes into them (absent: none).
// spanId is unique within the trace; operation is the full operation
// signature as logged (Kieker) or the span name (OTLP). Kieker's positions
// (traceId of the thread's part, orderIndex, eoi, ess, sessionId) appear
// as kieker.* attributes. Attribute ints beyond ±MaxSafeInt (such as a
// Kieker traceId above 2^53) are strings (AttrJSON); start, end and
// time are unix ns, which JavaScript rounds to 256 ns (durationNs is
// exact).
func AppendJSON(dst []byte, t *Trace) []byte {
	dst = append(dst, `{"traceId":`...)
	dst = strconv.AppendQuote(dst, t.ID.String())
	dst = append(dst, `,"start":`...)
	dst = strconv.AppendInt(dst, t.Start(), 10)
	dst = append(dst, `,"end":`...)
	dst = strconv.AppendInt(dst, t.End(), 10)
	dst = append(dst, `,"durationNs":`...)
	dst = strconv.AppendInt(dst, t.Duration(), 10)
	dst = append(dst, `,"hosts":`...)
	dst = appendStrings(dst, t.Hosts())
	if t.Part > 0 {
		dst = append(dst, `,"part":`...)
		dst = strconv.AppendInt(dst, int64(t.Part), 10)
	}
	if len(t.Resources) > 0 {
		dst = append(dst, `,"resources":[`...)
		for i, r := range t.Resources {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"attributes":`...)
			dst = appendAttrsObject(dst, r.Attributes)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(t.Scopes) > 0 {
		dst = append(dst, `,"scopes":[`...)
		for i, c := range t.Scopes {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = jsonstr.AppendString(dst, c.Name)
			dst = append(dst, `,"version":`...)
			dst = jsonstr.AppendString(dst, c.Version)
			dst = append(dst, `,"attributes":`...)
			dst = appendAttrsObject(dst, c.Attributes)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	x := NewTableIndex(t)
	dst = append(dst, `,"spans":[`...)
	for i := range t.Spans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendSpanJSON(dst, &t.Spans[i], &x)
	}
	dst = append(dst, `],"broken":`...)
	dst = appendStrings(dst, t.Broken)
	return append(dst, '}')
}

// appendAttrsObject appends as as a JSON object in their order, values
// as AttrJSON gives them.
func appendAttrsObject(dst []byte, as []Attr) []byte {
	dst = append(dst, '{')
	for i, a := range as {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.AppendString(dst, a.Key)
		dst = append(dst, ':')
		dst = append(dst, AttrJSON(a)...)
	}
	return append(dst, '}')
}

// TableIndex finds the index of a span's resource and scope in its
// trace's tables.
type TableIndex struct {
	res map[*Resource]int
	sc  map[*Scope]int
}

// NewTableIndex indexes t's tables.
func NewTableIndex(t *Trace) TableIndex {
	var x TableIndex
	if len(t.Resources) > 0 {
		x.res = make(map[*Resource]int, len(t.Resources))
		for i, r := range t.Resources {
			x.res[r] = i
		}
	}
	if len(t.Scopes) > 0 {
		x.sc = make(map[*Scope]int, len(t.Scopes))
		for i, c := range t.Scopes {
			x.sc[c] = i
		}
	}
	return x
}

// Resource returns the index of r in the trace's Resources (-1: nil or
// not there).
func (x *TableIndex) Resource(r *Resource) int {
	if i, ok := x.res[r]; ok && r != nil {
		return i
	}
	return -1
}

// Scope returns the index of c in the trace's Scopes (-1: nil or not
// there).
func (x *TableIndex) Scope(c *Scope) int {
	if i, ok := x.sc[c]; ok && c != nil {
		return i
	}
	return -1
}

func appendSpanJSON(dst []byte, s *Span, x *TableIndex) []byte {
	dst = append(dst, `{"spanId":`...)
	dst = strconv.AppendQuote(dst, s.SpanID.String())
	dst = append(dst, `,"parentSpanId":`...)
	if s.ParentID == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendQuote(dst, s.ParentID.String())
	}
	for _, kv := range [...]struct{ k, v string }{
		{"operation", s.Operation}, {"component", s.Component}, {"host", s.Host},
		{"service", s.Service}, {"thread", s.Thread},
	} {
		dst = append(dst, ',', '"')
		dst = append(dst, kv.k...)
		dst = append(dst, `":`...)
		dst = jsonstr.AppendString(dst, kv.v)
	}
	dst = append(dst, `,"start":`...)
	dst = strconv.AppendInt(dst, s.Start, 10)
	dst = append(dst, `,"end":`...)
	dst = strconv.AppendInt(dst, s.End, 10)
	dst = append(dst, `,"error":`...)
	dst = strconv.AppendBool(dst, s.Error)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendQuote(dst, s.Kind.String())
	if s.StatusMessage != "" {
		dst = append(dst, `,"statusMessage":`...)
		dst = jsonstr.AppendString(dst, s.StatusMessage)
	}
	if i := x.Resource(s.Resource); i >= 0 {
		dst = append(dst, `,"resource":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
	}
	if i := x.Scope(s.Scope); i >= 0 {
		dst = append(dst, `,"scope":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
	}
	dst = append(dst, `,"attributes":{`...)
	n := 0
	attr := func(a Attr) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = jsonstr.AppendString(dst, a.Key)
		dst = append(dst, ':')
		dst = append(dst, AttrJSON(a)...)
	}
	for _, a := range s.Attributes {
		attr(a)
	}
	for _, a := range KiekerAttrs(s) {
		attr(a)
	}
	dst = append(dst, `},"links":[`...)
	for i, l := range s.Links {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"traceId":`...)
		dst = strconv.AppendQuote(dst, l.TraceID.String())
		dst = append(dst, `,"spanId":`...)
		dst = strconv.AppendQuote(dst, l.SpanID.String())
		dst = append(dst, `,"kind":`...)
		dst = strconv.AppendQuote(dst, l.Kind.String())
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if len(s.Events) > 0 {
		dst = append(dst, `,"events":[`...)
		for i, e := range s.Events {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = jsonstr.AppendString(dst, e.Name)
			dst = append(dst, `,"time":`...)
			dst = strconv.AppendInt(dst, e.Time, 10)
			dst = append(dst, `,"attributes":`...)
			dst = append(dst, attrsJSON(e.Attributes, true)...)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// KiekerAttrs are a Kieker call's positions as attributes
// (kieker.traceId, kieker.orderIndex or kieker.eoi and kieker.ess,
// kieker.sessionId): what JSON shows, filters and pivots find.
func KiekerAttrs(s *Span) []Attr {
	switch s.Source {
	case FromEvents:
		out := []Attr{{Key: "kieker.traceId", Value: strconv.FormatInt(s.KiekerTrace, 10), Type: TypeInt},
			{Key: "kieker.orderIndex", Value: strconv.Itoa(int(s.OrderIndex)), Type: TypeInt}}
		if s.Session != "" {
			out = append(out, Attr{Key: "kieker.sessionId", Value: s.Session, Type: TypeString})
		}
		return out
	case FromExecution:
		out := []Attr{{Key: "kieker.traceId", Value: strconv.FormatInt(s.KiekerTrace, 10), Type: TypeInt},
			{Key: "kieker.eoi", Value: strconv.Itoa(int(s.EOI)), Type: TypeInt},
			{Key: "kieker.ess", Value: strconv.Itoa(int(s.ESS)), Type: TypeInt}}
		if s.Session != "" {
			out = append(out, Attr{Key: "kieker.sessionId", Value: s.Session, Type: TypeString})
		}
		return out
	}
	return nil
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.AppendString(dst, s)
	}
	return append(dst, ']')
}

// WriteText writes t as an indented call tree: a heading with the trace id,
// duration, hosts and span count, then one line per span with its
// duration, host and thread (when known), the operation, and marks for
// errors; then the reasons the trace is broken.
func WriteText(w io.Writer, t *Trace) error {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s: %s, %d spans", t.ID, formatNs(t.Duration()), len(t.Spans))
	if hs := t.Hosts(); len(hs) > 0 {
		fmt.Fprintf(&b, ", hosts %s", strings.Join(hs, ", "))
	}
	if t.Part > 0 {
		fmt.Fprintf(&b, ", part %d", t.Part)
	}
	b.WriteByte('\n')
	for i := range t.Spans {
		s := &t.Spans[i]
		b.WriteString(strings.Repeat("  ", int(s.Depth)+1))
		fmt.Fprintf(&b, "%s ", formatNs(s.Duration()))
		where := s.Host
		if s.Service != "" && s.Service != s.Host {
			where += "/" + s.Service
		}
		if s.Thread != "" {
			where += " thread " + s.Thread
		}
		if where != "" {
			fmt.Fprintf(&b, "[%s] ", strings.TrimSpace(where))
		}
		b.WriteString(s.Operation)
		if s.Error {
			b.WriteString("  ERROR")
			if s.StatusMessage != "" {
				b.WriteString(": " + s.StatusMessage)
			}
		}
		b.WriteByte('\n')
	}
	for _, r := range t.Broken {
		fmt.Fprintf(&b, "  broken: %s\n", r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatNs renders a duration in ns with a unit that suits it.
func formatNs(ns int64) string {
	switch a := max(ns, -ns); {
	case a >= 1e9:
		return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + " s"
	case a >= 1e6:
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) + " ms"
	case a >= 1e3:
		return strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64) + " µs"
	}
	return strconv.FormatInt(ns, 10) + " ns"
}
