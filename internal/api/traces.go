package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The views of a trace are internal/analysis's; the API names them in
// its OpenAPI description.
type (
	TraceView    = analysis.TraceView
	CriticalPath = analysis.CriticalPath
	Comparison   = analysis.Comparison
)

func getTrace(c *call) error {
	format := c.oneOf("format", "json", "json", "text", "jaeger", "otlp")
	t, err := c.trace()
	if err != nil {
		return err
	}
	switch format {
	case "text":
		var b bytes.Buffer
		trace.WriteText(&b, t)
		return c.raw("text/plain; charset=utf-8", b.Bytes())
	case "jaeger":
		// What Jaeger's /api/traces/{id} answers (its UI's "Trace JSON",
		// and the file its search page loads).
		writeJaeger(c.w, []jTrace{toJaeger(t)}, 1)
		return nil
	case "otlp":
		return c.raw("application/json", append(otlp.AppendTraceJSON(nil, t), '\n'))
	}
	return c.raw("application/json", append(trace.AppendJSON(nil, t), '\n'))
}

// maxViewSpans bounds a view.
const maxViewSpans = 200_000

func traceView(c *call) error {
	o := analysis.ViewOptions{
		MaxSpans:    c.int("maxSpans", 10_000, 1, maxViewSpans),
		MinDuration: int64(c.dur("minDuration", 0, 0, 1<<62)),
		Root:        c.int("root", -1, 0, 1<<31-1),
	}
	for _, s := range c.strs("reveal") {
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 {
			c.bad("reveal", "%q: want a span index", s)
			continue
		}
		o.Reveal = append(o.Reveal, i)
	}
	o.Attributes = c.bool("attributes")
	t, err := c.trace()
	if err != nil {
		return err
	}
	n := len(t.Spans)
	if o.Root >= n {
		return errorf(http.StatusBadRequest, "root: %d: the trace has %d spans (0 to %d)", o.Root, n, n-1)
	}
	for _, i := range o.Reveal {
		if i >= n {
			return errorf(http.StatusBadRequest, "reveal: %d: the trace has %d spans (0 to %d)", i, n, n-1)
		}
	}
	return c.json(analysis.NewTree(t).View(o))
}

func criticalPath(c *call) error {
	t, err := c.trace()
	if err != nil {
		return err
	}
	return c.json(analysis.NewTree(t).CriticalPath())
}

func compareTraces(c *call, st *store.Store) error {
	var ids [2]trace.ID
	for i, name := range []string{"a", "b"} {
		s := c.str(name)
		if s == "" {
			c.bad(name, "required: a trace id")
			continue
		}
		id, err := trace.ParseID(s)
		if err != nil {
			c.bad(name, "%v", err)
		}
		ids[i] = id
	}
	if err := c.check(); err != nil {
		return err
	}
	var ts [2]*trace.Trace
	for i, id := range ids {
		t, err := st.Get(id)
		if errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusNotFound, "trace %s not found", id)
		}
		if err != nil {
			return err
		}
		ts[i] = t
	}
	return c.json(analysis.Compare(ts[0], ts[1]))
}

// Attr is an attribute with its type: value is a JSON string, number,
// boolean, or (type json) array or object.
type Attr struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func attrList(as []trace.Attr) []Attr {
	out := make([]Attr, 0, len(as))
	for _, a := range as {
		out = append(out, Attr{a.Key, a.Type.String(), trace.AttrJSON(a)})
	}
	return out
}

// Event is something that happened in a span. Time is unix ns, which
// JavaScript rounds to 256 ns; OffsetNs (Time less the span's start) is
// exact.
type Event struct {
	Name       string `json:"name"`
	Time       int64  `json:"time"`
	OffsetNs   int64  `json:"offsetNs"`
	Attributes []Attr `json:"attributes"`
}

// Link points to another span.
type Link struct {
	TraceID    string `json:"traceId"`
	SpanID     string `json:"spanId"`
	Kind       string `json:"kind"`
	TraceState string `json:"traceState,omitempty"`
	Attributes []Attr `json:"attributes"`
}

// KiekerPosition is where a Kieker call sits in its thread's trace.
// TraceID is a string of decimal digits: a Kieker traceId is often
// above 2^53, which JavaScript would round as a number.
type KiekerPosition struct {
	TraceID    int64 `json:"traceId,string"`
	OrderIndex int32 `json:"orderIndex"`
	EOI        int32 `json:"eoi"`
	ESS        int32 `json:"ess"`
}

// Resource is the OpenTelemetry resource a span came from: every
// attribute it was sent with.
type Resource struct {
	Attributes []Attr `json:"attributes"`
}

// Scope is the instrumentation scope a span came from.
type Scope struct {
	Name       string `json:"name"`
	Version    string `json:"version,omitempty"`
	Attributes []Attr `json:"attributes"`
}

// SpanDetail is one span in full. Resource and Scope are absent for
// spans without them (Kieker's, zorka's).
type SpanDetail struct {
	Index    int   `json:"index"`
	Parent   int   `json:"parent"`
	Children []int `json:"children"`
	Depth    int32 `json:"depth"`
	analysis.SpanRef
	Session string `json:"session,omitempty"`
	Start   int64  `json:"start"`
	// OffsetNs is Start less the trace's start: exact in JavaScript,
	// where Start (unix ns) is rounded to 256 ns.
	OffsetNs      int64           `json:"offsetNs"`
	End           int64           `json:"end"`
	DurationNs    int64           `json:"durationNs"`
	SelfNs        int64           `json:"selfNs"`
	Error         bool            `json:"error"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage,omitempty"`
	Source        string          `json:"source"`
	Attributes    []Attr          `json:"attributes"`
	Events        []Event         `json:"events"`
	Links         []Link          `json:"links"`
	Kieker        *KiekerPosition `json:"kieker,omitempty"`
	Resource      *Resource       `json:"resource,omitempty"`
	Scope         *Scope          `json:"scope,omitempty"`
}

var statusNames = [...]string{"unset", "ok", "error"}

func getSpan(c *call) error {
	idx := c.int("index", 0, 0, 1<<31-1)
	t, err := c.trace()
	if err != nil {
		return err
	}
	if idx >= len(t.Spans) {
		return errorf(http.StatusNotFound, "trace %s has %d spans, no span %d", t.ID, len(t.Spans), idx)
	}
	tr := analysis.NewTree(t)
	s := &t.Spans[idx]
	d := SpanDetail{Index: idx, Parent: tr.Parent(idx), Children: tr.Children(idx), Depth: s.Depth, SpanRef: analysis.NewSpanRef(s),
		Session: s.Session, Start: s.Start, OffsetNs: s.Start - t.Start(), End: s.End, DurationNs: s.Duration(), SelfNs: tr.Self(idx),
		Error: s.Error, Kind: s.Kind.String(), Status: "unset", StatusMessage: s.StatusMessage, Source: s.Source.String(),
		Attributes: attrList(s.Attributes), Events: []Event{}, Links: []Link{}}
	if int(s.Status) < len(statusNames) {
		d.Status = statusNames[s.Status]
	}
	for _, e := range s.Events {
		d.Events = append(d.Events, Event{e.Name, e.Time, e.Time - s.Start, attrList(e.Attributes)})
	}
	for _, l := range s.Links {
		d.Links = append(d.Links, Link{l.TraceID.String(), l.SpanID.String(), l.Kind.String(), l.TraceState, attrList(l.Attributes)})
	}
	if s.Source == trace.FromEvents || s.Source == trace.FromExecution {
		d.Kieker = &KiekerPosition{s.KiekerTrace, s.OrderIndex, s.EOI, s.ESS}
	}
	if r := s.Resource; r != nil {
		d.Resource = &Resource{Attributes: attrList(r.Attributes)}
	}
	if sc := s.Scope; sc != nil {
		d.Scope = &Scope{Name: sc.Name, Version: sc.Version, Attributes: attrList(sc.Attributes)}
	}
	return c.json(d)
}

// Hit is a span found inside a trace.
type Hit struct {
	Index      int    `json:"index"`
	SpanID     string `json:"spanId"`
	Depth      int32  `json:"depth"`
	Operation  string `json:"operation"`
	Component  string `json:"component"`
	DurationNs int64  `json:"durationNs"`
}

// FindResult is what a search inside a trace found.
type FindResult struct {
	Hits []Hit `json:"hits"`
	// Count is the number of hits (Hits holds at most limit of them).
	Count int `json:"count"`
}

func findInTrace(c *call) error {
	text := c.str("q")
	if text == "" {
		c.bad("q", "required: TEXT or ~REGEX")
	}
	fields, ok := trace.ParseFields(c.str("fields"))
	if !ok {
		c.bad("fields", "%q: want classes, methods, attributes, exceptions or all", c.str("fields"))
	}
	ignoreCase := c.bool("ignoreCase")
	limit := c.int("limit", 10_000, 1, 1_000_000)
	var re *regexp.Regexp
	if expr, ok := strings.CutPrefix(text, "~"); ok {
		if ignoreCase {
			expr = "(?i)" + expr
		}
		var err error
		if re, err = compileRegex(expr); err != nil {
			c.bad("q", "~REGEX: %v", err)
		}
	}
	t, err := c.trace()
	if err != nil {
		return err
	}
	idx := trace.Find(t, text, re, fields, ignoreCase)
	res := FindResult{Hits: make([]Hit, 0, min(len(idx), limit)), Count: len(idx)}
	for _, i := range idx[:min(len(idx), limit)] {
		s := &t.Spans[i]
		res.Hits = append(res.Hits, Hit{i, s.SpanID.String(), s.Depth, s.Operation, s.Component, s.Duration()})
	}
	return c.json(res)
}

// Ranking is a trace's method ranking.
type Ranking struct {
	Rows []trace.MethodStat `json:"rows"`
}

func rankTrace(c *call) error {
	t, err := c.trace()
	if err != nil {
		return err
	}
	rows := trace.Rank(t)
	if rows == nil {
		rows = []trace.MethodStat{}
	}
	return c.json(Ranking{rows})
}
