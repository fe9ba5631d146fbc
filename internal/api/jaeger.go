package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Jaeger's query API (v2.13's /api/*, as its UI and Grafana's Jaeger
// data source use it), answered from the trace store. The shapes are
// Jaeger's, field by field (see /work/shared/jaeger-api and
// docs/API.md); where Jaeger is wrong, this is not: dependencies count
// every cross-service call, minDuration and maxDuration apply to the
// named service's spans, total is filled in.

// jEnvelope is the answer of every Jaeger endpoint.
type jEnvelope struct {
	Data   any      `json:"data"`
	Total  int      `json:"total"`
	Limit  int      `json:"limit"`
	Offset int      `json:"offset"`
	Errors []jError `json:"errors"`
}

type jError struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

type jTrace struct {
	TraceID   string              `json:"traceID"`
	Spans     []jSpan             `json:"spans"`
	Processes map[string]jProcess `json:"processes"`
	Warnings  []string            `json:"warnings" openapi:"nullable"`
}

type jSpan struct {
	TraceID       string   `json:"traceID"`
	SpanID        string   `json:"spanID"`
	OperationName string   `json:"operationName"`
	References    []jRef   `json:"references"`
	StartTime     int64    `json:"startTime"`
	Duration      int64    `json:"duration"`
	Tags          []jTag   `json:"tags"`
	Logs          []jLog   `json:"logs"`
	ProcessID     string   `json:"processID"`
	Warnings      []string `json:"warnings" openapi:"nullable"`
}

type jRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jTag struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

type jLog struct {
	Timestamp int64  `json:"timestamp"`
	Fields    []jTag `json:"fields"`
}

type jProcess struct {
	ServiceName string `json:"serviceName"`
	Tags        []jTag `json:"tags"`
}

type jOperation struct {
	Name     string `json:"name"`
	SpanKind string `json:"spanKind"`
}

type jDependency struct {
	Parent    string `json:"parent"`
	Child     string `json:"child"`
	CallCount int64  `json:"callCount"`
}

func writeJaeger(w http.ResponseWriter, data any, total int) {
	writeJSON(w, http.StatusOK, jEnvelope{Data: data, Total: total})
}

// writeJaegerError answers as Jaeger does: data null, the error in
// errors (with application/json, where Jaeger says text/plain).
func writeJaegerError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, jEnvelope{Errors: []jError{{code, msg}}})
}

func strTag(k, v string) jTag {
	b, _ := json.Marshal(v)
	return jTag{k, "string", b}
}

// jaegerTag converts an attribute: Jaeger's types string, bool, int64,
// float64 and binary (base64); arrays and maps become their JSON text.
// An int beyond ±2^53−1 is a string tag, as Jaeger's own API sends it
// (jaegertracing/jaeger#3958): Jaeger's UI and Grafana read numbers as
// doubles and would show it rounded.
func jaegerTag(a trace.Attr) jTag {
	switch a.Type {
	case trace.TypeBool, trace.TypeInt, trace.TypeDouble:
		v := trace.AttrJSON(a)
		if len(v) > 0 && v[0] != '"' {
			return jTag{a.Key, a.Type.String(), v}
		}
	case trace.TypeBytes:
		t := strTag(a.Key, a.Value)
		t.Type = "binary"
		return t
	}
	return strTag(a.Key, a.Value)
}

// tagText is a tag's value as text, as Jaeger's tag filters compare it.
func tagText(t jTag) string {
	var s string
	if json.Unmarshal(t.Value, &s) == nil {
		return s
	}
	return string(t.Value)
}

func sortTags(ts []jTag) []jTag {
	slices.SortStableFunc(ts, func(a, b jTag) int { return strings.Compare(a.Key, b.Key) })
	return ts
}

var statusCodes = [...]string{"UNSET", "OK", "ERROR"}

// spanTags are a span's tags as Jaeger shows them: its attributes, the
// span kind, the status (error: true, otel.status_code,
// otel.status_description), the class and thread of spans that are not
// OTLP's, Kieker's positions; sorted by key.
func spanTags(s *trace.Span) []jTag {
	tags := make([]jTag, 0, len(s.Attributes)+4)
	has := map[string]bool{}
	for _, a := range s.Attributes {
		tags = append(tags, jaegerTag(a))
		has[a.Key] = true
	}
	add := func(t jTag) {
		if !has[t.Key] {
			has[t.Key] = true
			tags = append(tags, t)
		}
	}
	if s.Kind != trace.KindUnspecified {
		add(strTag("span.kind", s.Kind.String()))
	}
	if s.Error {
		add(jTag{"error", "bool", json.RawMessage("true")})
	}
	if s.Status != trace.StatusUnset && int(s.Status) < len(statusCodes) {
		add(strTag("otel.status_code", statusCodes[s.Status]))
	}
	if s.StatusMessage != "" {
		add(strTag("otel.status_description", s.StatusMessage))
	}
	if s.Source == trace.FromSpan {
		// The instrumentation scope: its name and version as
		// OpenTelemetry names them in Jaeger's model, its attributes as
		// they are. (An OTLP span's component is code.namespace, else
		// its scope's name.)
		if sc := s.Scope; sc != nil {
			if sc.Name != "" {
				add(strTag(trace.ScopeNameKey, sc.Name))
			}
			if sc.Version != "" {
				add(strTag(trace.ScopeVersionKey, sc.Version))
			}
			for _, a := range sc.Attributes {
				add(jaegerTag(a))
			}
		} else if _, ok := s.Attr("code.namespace"); !ok && s.Component != "" {
			add(strTag(trace.ScopeNameKey, s.Component))
		}
	} else {
		if s.Component != "" {
			add(strTag("code.namespace", s.Component))
		}
		if s.Thread != "" {
			add(strTag("thread.id", s.Thread))
		}
		if s.Source == trace.FromEvents || s.Source == trace.FromExecution {
			// An int64 tag beyond 2^53 is a string tag (jaegerTag), as
			// Jaeger sends it: its UI would round the number.
			add(jaegerTag(trace.Attr{Key: "kieker.traceId", Value: strconv.FormatInt(s.KiekerTrace, 10), Type: trace.TypeInt}))
			if s.Source == trace.FromEvents {
				add(jTag{"kieker.orderIndex", "int64", json.RawMessage(strconv.Itoa(int(s.OrderIndex)))})
			} else {
				add(jTag{"kieker.eoi", "int64", json.RawMessage(strconv.Itoa(int(s.EOI)))})
				add(jTag{"kieker.ess", "int64", json.RawMessage(strconv.Itoa(int(s.ESS)))})
			}
			if s.Session != "" {
				add(strTag("kieker.sessionId", s.Session))
			}
		}
	}
	return sortTags(tags)
}

// processTags are the tags of a span's process: every attribute of its
// OpenTelemetry resource but service.name (the process's serviceName), as
// Jaeger's OTLP receiver makes them; its host and pid where the resource
// does not name them (Kieker's and zorka's spans have no resource);
// sorted by key.
func processTags(s *trace.Span) []jTag {
	tags := []jTag{}
	var hasHost, hasPID bool
	if r := s.Resource; r != nil {
		for _, a := range r.Attributes {
			switch a.Key {
			case "service.name":
				continue
			case "host.name":
				hasHost = true
			case "process.pid":
				hasPID = true
			}
			tags = append(tags, jaegerTag(a))
		}
	}
	if s.Host != "" && !hasHost {
		tags = append(tags, strTag("host.name", s.Host))
	}
	if s.Process != "" && !hasPID {
		tags = append(tags, strTag("process.pid", s.Process))
	}
	return sortTags(tags)
}

// jaegerID is a trace id as Jaeger writes it: 32 hex digits. A Kieker
// traceId N (the high half zero) is the 32 hex digits of N as an
// unsigned 64-bit number.
func jaegerID(id trace.ID) string { return id.Hex() }

// parseJaegerID parses up to 32 hex digits (shorter ids are padded with
// zeros on the left, as Jaeger does).
func parseJaegerID(s string) (trace.ID, error) {
	if s == "" || len(s) > 32 {
		return trace.ID{}, fmt.Errorf("trace id %q: want 1 to 32 hex digits", s)
	}
	padded := strings.Repeat("0", 32-len(s)) + strings.ToLower(s)
	hi, err1 := strconv.ParseUint(padded[:16], 16, 64)
	lo, err2 := strconv.ParseUint(padded[16:], 16, 64)
	if err1 != nil || err2 != nil {
		return trace.ID{}, fmt.Errorf("trace id %q: want 1 to 32 hex digits", s)
	}
	return trace.ID{Hi: hi, Lo: lo}, nil
}

// toJaeger converts a trace. Spans are in tree order; processes p1, p2, …
// in order of first use; the trace's warnings are the reasons it is
// broken.
func toJaeger(t *trace.Trace) jTrace {
	tid := jaegerID(t.ID)
	jt := jTrace{TraceID: tid, Spans: make([]jSpan, 0, len(t.Spans)), Processes: map[string]jProcess{}}
	if len(t.Broken) > 0 {
		jt.Warnings = t.Broken
	}
	type procKey struct {
		service, host, pid string
		res                *trace.Resource
	}
	procs := map[procKey]string{}
	for i := range t.Spans {
		s := &t.Spans[i]
		pk := procKey{store.ServiceOf(s), s.Host, s.Process, s.Resource}
		pid, ok := procs[pk]
		if !ok {
			pid = "p" + strconv.Itoa(len(procs)+1)
			procs[pk] = pid
			jt.Processes[pid] = jProcess{ServiceName: pk.service, Tags: processTags(s)}
		}
		js := jSpan{TraceID: tid, SpanID: s.SpanID.String(), OperationName: s.Operation, References: []jRef{},
			StartTime: s.Start / 1000, Duration: s.Duration() / 1000, Tags: spanTags(s), Logs: []jLog{}, ProcessID: pid}
		// A span whose parent is also a link target (a CONSUMER) has the
		// one FOLLOWS_FROM reference, as Jaeger shows it.
		parentLinked := false
		for _, l := range s.Links {
			if l.TraceID == t.ID && l.SpanID == s.ParentID {
				parentLinked = true
			}
		}
		if s.ParentID != 0 && !parentLinked {
			js.References = append(js.References, jRef{"CHILD_OF", tid, s.ParentID.String()})
		}
		for _, l := range s.Links {
			js.References = append(js.References, jRef{"FOLLOWS_FROM", jaegerID(l.TraceID), l.SpanID.String()})
		}
		for _, e := range s.Events {
			fields := []jTag{strTag("event", e.Name)}
			attrs := make([]jTag, 0, len(e.Attributes))
			for _, a := range e.Attributes {
				attrs = append(attrs, jaegerTag(a))
			}
			js.Logs = append(js.Logs, jLog{e.Time / 1000, append(fields, sortTags(attrs)...)})
		}
		jt.Spans = append(jt.Spans, js)
	}
	return jt
}

func jaegerServices(c *call, st *store.Store) error {
	svcs := st.Services()
	writeJaeger(c.w, svcs, len(svcs))
	return nil
}

func jaegerServiceOperations(c *call, st *store.Store) error {
	names := []string{}
	for _, op := range st.Operations(c.str("service")) {
		if len(names) == 0 || names[len(names)-1] != op.Name {
			names = append(names, op.Name)
		}
	}
	writeJaeger(c.w, names, len(names))
	return nil
}

func jaegerOperations(c *call, st *store.Store) error {
	svc := c.str("service")
	if svc == "" {
		return errorf(http.StatusBadRequest, "parameter 'service' is required")
	}
	kind := c.str("spanKind")
	ops := []jOperation{}
	for _, op := range st.Operations(svc) {
		k := op.Kind.String()
		if op.Kind == trace.KindUnspecified {
			k = ""
		}
		if kind != "" && k != kind && !(kind == "unspecified" && k == "") {
			continue
		}
		ops = append(ops, jOperation{op.Name, k})
	}
	writeJaeger(c.w, ops, len(ops))
	return nil
}

func jaegerTrace(c *call, st *store.Store) error {
	id, err := parseJaegerID(c.str("traceID"))
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	t, err := st.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "trace not found")
	}
	if err != nil {
		return err
	}
	writeJaeger(c.w, []jTrace{toJaeger(t)}, 1)
	return nil
}

// jaegerMatch is the span a Jaeger search asks for: of the service, with
// the operation, the duration and every tag.
type jaegerMatch struct {
	service, operation string
	min, max           int64
	tags               [][2]string
}

func (m *jaegerMatch) span(s *trace.Span) bool {
	if store.ServiceOf(s) != m.service || m.operation != "" && s.Operation != m.operation {
		return false
	}
	d := s.Duration()
	if m.min > 0 && d < m.min || m.max > 0 && d > m.max {
		return false
	}
	if len(m.tags) == 0 {
		return true
	}
	tags := append(spanTags(s), processTags(s)...)
	for _, want := range m.tags {
		found := false
		for _, t := range tags {
			if t.Key == want[0] && tagText(t) == want[1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// derivedTags are the tags spanTags makes that are not attributes: they
// cannot narrow the store's search.
var derivedTags = map[string]bool{"span.kind": true, "error": true, "otel.scope.name": true, "otel.status_code": true, "otel.status_description": true,
	"code.namespace": true, "thread.id": true, "host.name": true, "process.pid": true, "kieker.traceId": true,
	"kieker.orderIndex": true, "kieker.eoi": true, "kieker.ess": true, "kieker.sessionId": true}

// jaegerLimit is Jaeger's default number of traces.
const jaegerLimit = 100

func jaegerSearch(c *call, st *store.Store) error {
	if ids := c.strs("traceID"); len(ids) > 0 {
		out := []jTrace{}
		for _, s := range ids {
			id, err := parseJaegerID(s)
			if err != nil {
				return errorf(http.StatusBadRequest, "%v", err)
			}
			if t, err := st.Get(id); err == nil {
				out = append(out, toJaeger(t))
			}
		}
		if len(out) == 0 {
			return errorf(http.StatusNotFound, "trace not found")
		}
		writeJaeger(c.w, out, len(out))
		return nil
	}
	m := jaegerMatch{service: c.str("service"), operation: c.str("operation")}
	if m.service == "" {
		return errorf(http.StatusBadRequest, "parameter 'service' is required")
	}
	var errs []string
	dur := func(name string) int64 {
		s := c.str(name)
		if s == "" {
			return 0
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Sprintf("unable to parse param '%s': want a duration such as 7ms or 1.5s, not %q", name, s))
		}
		return int64(d)
	}
	m.min, m.max = dur("minDuration"), dur("maxDuration")
	num := func(name string, def int64) int64 { return jaegerNum(c, &errs, name, "a whole number", def) }
	now := c.a.opt.Now()
	end := num("end", now.UnixMicro())
	start := num("start", end-int64(48*time.Hour/time.Microsecond))
	limit := int(num("limit", jaegerLimit))
	if limit == 0 {
		limit = jaegerLimit
	}
	if limit > 10_000 {
		errs = append(errs, fmt.Sprintf("limit %d: at most 10000", limit))
	}
	if start > end {
		errs = append(errs, "start is after end")
	}
	if s := c.str("tags"); s != "" {
		var raw map[string]any
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			errs = append(errs, fmt.Sprintf("malformed 'tags' parameter, cannot unmarshal JSON: %v", err))
		}
		for k, v := range raw {
			m.tags = append(m.tags, [2]string{k, fmt.Sprint(v)})
		}
	}
	for _, kv := range c.strs("tag") {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			errs = append(errs, fmt.Sprintf("malformed 'tag' parameter %q: want key:value", kv))
		}
		m.tags = append(m.tags, [2]string{k, v})
	}
	if err := c.check(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return errorf(http.StatusBadRequest, "%s", strings.Join(errs, "; "))
	}
	slices.SortFunc(m.tags, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
	// The store narrows the search: the time range, the duration (a
	// trace lasts at least as long as each of its spans), attribute tags
	// (some span has them), the service where it is a span's service or
	// host only.
	q := store.Query{Since: start * 1000, Until: end * 1000, MinDuration: time.Duration(m.min)}
	for _, t := range m.tags {
		if !derivedTags[t[0]] {
			q.Attrs = append(q.Attrs, trace.Attr{Key: t[0], Value: t[1]})
		}
	}
	switch viaService, viaHost, _ := st.ServiceSource(m.service); {
	case viaService && !viaHost:
		q.Service = m.service
	case viaHost && !viaService && m.service != trace.UnknownService:
		// (Spans that name neither run on no host of that name.)
		q.Hosts = []string{m.service}
	}
	out := []jTrace{}
	sum, err := scan(c.ctx, st, q, 1_000_000, 10*time.Second, func(t *trace.Trace) bool {
		for i := range t.Spans {
			if m.span(&t.Spans[i]) {
				out = append(out, toJaeger(t))
				break
			}
		}
		return len(out) < limit
	})
	if err != nil {
		return err
	}
	if sum.Partial {
		c.w.Header().Set("X-Tracebridge-Partial", "the time budget ended the search")
	}
	writeJaeger(c.w, out, len(out))
	return nil
}

func jaegerDependencies(c *call, st *store.Store) error {
	now := c.a.opt.Now()
	var errs []string
	num := func(name string, def int64) int64 {
		return jaegerNum(c, &errs, name, "a whole number of milliseconds", def)
	}
	end := num("endTs", now.UnixMilli())
	lookback := num("lookback", int64(24*time.Hour/time.Millisecond))
	if len(errs) > 0 {
		return errorf(http.StatusBadRequest, "%s", strings.Join(errs, "; "))
	}
	end = min(end, 9_000_000_000_000) // ms that fit int64 ns
	lookback = min(lookback, end)
	q := store.Query{Since: (end - lookback) * 1e6, Until: end * 1e6}
	type edge struct{ parent, child string }
	counts := map[edge]int64{}
	sum, err := scan(c.ctx, st, q, 10_000_000, 20*time.Second, func(t *trace.Trace) bool {
		for i := range t.Spans {
			p := int(t.Spans[i].Parent)
			if p < 0 || p >= i {
				continue
			}
			ps, cs := store.ServiceOf(&t.Spans[p]), store.ServiceOf(&t.Spans[i])
			if ps != cs {
				counts[edge{ps, cs}]++
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	deps := make([]jDependency, 0, len(counts))
	for e, n := range counts {
		deps = append(deps, jDependency{e.parent, e.child, n})
	}
	slices.SortFunc(deps, func(a, b jDependency) int {
		return cmp.Or(cmp.Compare(a.Parent, b.Parent), cmp.Compare(a.Child, b.Child))
	})
	if sum.Partial || sum.Limited {
		c.w.Header().Set("X-Tracebridge-Partial", fmt.Sprintf("counted the newest %d traces of the window", sum.Traces))
	}
	writeJaeger(c.w, deps, len(deps))
	return nil
}

// jaegerNum reads a parameter of Jaeger's API that is a whole number ≥ 0
// (def when absent); a bad one is noted in errs in Jaeger's words.
func jaegerNum(c *call, errs *[]string, name, want string, def int64) int64 {
	s := c.str(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		*errs = append(*errs, fmt.Sprintf("unable to parse param '%s': want %s, not %q", name, want, s))
		return def
	}
	return v
}
