package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// fixture reads a response Jaeger 2.13 gave (/work/shared/jaeger-api).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testcorpus.Path(t, "jaeger-api", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fromJaeger turns a Jaeger trace back into the trace model: the spans'
// tags become attributes except those Jaeger makes of the model
// (span.kind, error, otel.status_code, otel.status_description,
// otel.scope.name), the process says service and host, logs are events,
// a lone FOLLOWS_FROM reference is the parent and a link (Jaeger's
// CONSUMER quirk).
func fromJaeger(t *testing.T, jt jTrace) *trace.Trace {
	t.Helper()
	id, err := parseJaegerID(jt.TraceID)
	if err != nil {
		t.Fatal(err)
	}
	var spans []trace.Span
	for _, js := range jt.Spans {
		sid, err := trace.ParseSpanID(js.SpanID)
		if err != nil {
			t.Fatal(err)
		}
		s := trace.Span{SpanID: sid, Operation: js.OperationName, Start: js.StartTime * 1000, End: (js.StartTime + js.Duration) * 1000, Source: trace.FromSpan}
		for _, r := range js.References {
			rid, _ := trace.ParseSpanID(r.SpanID)
			switch r.RefType {
			case "CHILD_OF":
				s.ParentID = rid
			case "FOLLOWS_FROM":
				if s.ParentID == 0 && r.TraceID == jt.TraceID && len(js.References) == 1 {
					s.ParentID = rid
				}
				tid, _ := parseJaegerID(r.TraceID)
				s.Links = append(s.Links, trace.Link{TraceID: tid, SpanID: rid})
			}
		}
		for _, tag := range js.Tags {
			v := tagText(tag)
			switch tag.Key {
			case "span.kind":
				for k := trace.KindUnspecified; k <= trace.KindConsumer; k++ {
					if k.String() == v {
						s.Kind = k
					}
				}
			case "error":
				s.Error = v == "true"
			case "otel.status_code":
				s.Status = map[string]trace.Status{"OK": trace.StatusOK, "ERROR": trace.StatusError}[v]
			case "otel.status_description":
				s.StatusMessage = v
			case "otel.scope.name":
				s.Component = v
			default:
				s.Attributes = append(s.Attributes, attrOf(t, tag))
			}
		}
		p := jt.Processes[js.ProcessID]
		s.Service = p.ServiceName
		for _, tag := range p.Tags {
			if tag.Key == "host.name" {
				s.Host = tagText(tag)
			}
		}
		for _, l := range js.Logs {
			e := trace.Event{Time: l.Timestamp * 1000}
			for _, f := range l.Fields {
				if f.Key == "event" {
					e.Name = tagText(f)
					continue
				}
				e.Attributes = append(e.Attributes, attrOf(t, f))
			}
			s.Events = append(s.Events, e)
		}
		spans = append(spans, s)
	}
	return build(id, spans)
}

func attrOf(t *testing.T, tag jTag) trace.Attr {
	types := map[string]trace.ValueType{"string": trace.TypeString, "bool": trace.TypeBool, "int64": trace.TypeInt, "float64": trace.TypeDouble, "binary": trace.TypeBytes}
	ty, ok := types[tag.Type]
	if !ok {
		t.Fatalf("tag %s: type %q", tag.Key, tag.Type)
	}
	return trace.Attr{Key: tag.Key, Value: tagText(tag), Type: ty}
}

// jaegerEnvelopeOf decodes an answer, keeping data raw.
type rawEnvelope struct {
	Data   json.RawMessage `json:"data"`
	Total  int             `json:"total"`
	Limit  int             `json:"limit"`
	Offset int             `json:"offset"`
	Errors []jError        `json:"errors"`
}

// compareJaeger checks our trace against Jaeger's field by field: the
// key order of every object, every span (by id: Jaeger's span order is
// its store's) with its references, times, tags and logs, and each
// span's process. Process tags are the known difference: the trace model
// keeps a process's host and pid, not the rest of an OTLP resource
// (service.namespace, telemetry.sdk.*).
func compareJaeger(t *testing.T, ours, theirs json.RawMessage) {
	t.Helper()
	if got, want := keys(t, ours), keys(t, theirs); !slices.Equal(got, want) {
		t.Errorf("trace keys %v, Jaeger's %v", got, want)
	}
	var o, j jTrace
	json.Unmarshal(ours, &o)
	json.Unmarshal(theirs, &j)
	if o.TraceID != j.TraceID || len(o.Spans) != len(j.Spans) || o.Warnings != nil {
		t.Fatalf("trace %s with %d spans (warnings %v), Jaeger's %s with %d", o.TraceID, len(o.Spans), o.Warnings, j.TraceID, len(j.Spans))
	}
	var rawO, rawJ struct{ Spans []json.RawMessage }
	json.Unmarshal(ours, &rawO)
	json.Unmarshal(theirs, &rawJ)
	for i, js := range j.Spans {
		k := slices.IndexFunc(o.Spans, func(s jSpan) bool { return s.SpanID == js.SpanID })
		if k < 0 {
			t.Errorf("span %s missing", js.SpanID)
			continue
		}
		if got, want := keys(t, rawO.Spans[k]), keys(t, rawJ.Spans[i]); !slices.Equal(got, want) {
			t.Errorf("span keys %v, Jaeger's %v", got, want)
		}
		os := o.Spans[k]
		op, jp := o.Processes[os.ProcessID], j.Processes[js.ProcessID]
		if op.ServiceName != jp.ServiceName {
			t.Errorf("span %s: service %s, Jaeger's %s", js.SpanID, op.ServiceName, jp.ServiceName)
		}
		for _, tag := range op.Tags {
			if !slices.ContainsFunc(jp.Tags, func(x jTag) bool { return x.Key == tag.Key && bytes.Equal(x.Value, tag.Value) && x.Type == tag.Type }) {
				t.Errorf("span %s: process tag %v not among Jaeger's", js.SpanID, tag)
			}
		}
		os.ProcessID, js.ProcessID = "", ""
		if diff := cmp.Diff(js, os); diff != "" {
			t.Errorf("span %s differs from Jaeger's (-Jaeger +ours):\n%s", js.SpanID, diff)
		}
	}
}

// TestJaegerTraceByID: a trace comes back in Jaeger's shape, field by
// field as Jaeger 2.13 answered it (the trace of api-traces-by-id.json,
// its error span with the exception log, the CONSUMER's lone
// FOLLOWS_FROM reference); total is filled in; unknown ids are Jaeger's
// 404.
func TestJaegerTraceByID(t *testing.T) {
	var want rawEnvelope
	if err := json.Unmarshal(fixture(t, "api-traces-by-id.json"), &want); err != nil {
		t.Fatal(err)
	}
	var traces []json.RawMessage
	json.Unmarshal(want.Data, &traces)
	var jt jTrace
	json.Unmarshal(traces[0], &jt)
	e := newEnv(t, nil, fromJaeger(t, jt))

	body := e.get("/api/traces/"+jt.TraceID, nil)
	if got, want := keys(t, body), keys(t, fixture(t, "api-traces-by-id.json")); !slices.Equal(got, want) {
		t.Fatalf("envelope keys %v, Jaeger's %v", got, want)
	}
	var got rawEnvelope
	json.Unmarshal(body, &got)
	var ours []json.RawMessage
	json.Unmarshal(got.Data, &ours)
	if len(ours) != 1 || got.Total != 1 || got.Limit != 0 || got.Offset != 0 || got.Errors != nil {
		t.Fatalf("envelope %s: want one trace, total 1 (Jaeger says 0), limit and offset 0, errors null", body)
	}
	compareJaeger(t, ours[0], traces[0])
	// Jaeger takes ids of fewer digits, padded with zeros.
	e.get("/api/traces/"+strings.ToUpper(jt.TraceID), nil)

	code, b, _ := e.do("GET", "/api/traces/00000000000000000000000000000001", "")
	if code != http.StatusNotFound || !jsonEqual(t, b, fixture(t, "api-traces-by-id-404.json")) {
		t.Errorf("unknown trace: %d %s; want Jaeger's 404 %s", code, b, fixture(t, "api-traces-by-id-404.json"))
	}
	for _, bad := range []string{"xyz", strings.Repeat("a", 33)} {
		code, b, _ := e.do("GET", "/api/traces/"+bad, "")
		var env rawEnvelope
		if json.Unmarshal(b, &env); code != http.StatusBadRequest || string(env.Data) != "null" || len(env.Errors) != 1 || env.Errors[0].Code != 400 {
			t.Errorf("trace id %q: %d %s; want 400 in Jaeger's envelope", bad, code, b)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return cmp.Equal(x, y)
}

// TestJaegerSearch: the traces of api-traces-search.json come back from a
// search for their service in Jaeger's shape; a search without a service
// is Jaeger's 400.
func TestJaegerSearch(t *testing.T) {
	var want rawEnvelope
	json.Unmarshal(fixture(t, "api-traces-search.json"), &want)
	var traces []json.RawMessage
	json.Unmarshal(want.Data, &traces)
	var model []*trace.Trace
	for _, raw := range traces {
		var jt jTrace
		json.Unmarshal(raw, &jt)
		model = append(model, fromJaeger(t, jt))
	}
	e := newEnv(t, nil, model...)
	// Jaeger was asked for svc-1; the spans kept in the recording are of
	// svc-0 and svc-3.
	q := url.Values{"service": {"svc-0"}, "limit": {"20"}, "lookback": {"1h"}, "start": {"0"}}
	body := e.get("/api/traces?"+q.Encode(), nil)
	var got rawEnvelope
	json.Unmarshal(body, &got)
	var ours []json.RawMessage
	json.Unmarshal(got.Data, &ours)
	if len(ours) != len(traces) || got.Total != len(traces) {
		t.Fatalf("%d traces, total %d; want %d", len(ours), got.Total, len(traces))
	}
	for _, raw := range traces {
		var jt jTrace
		json.Unmarshal(raw, &jt)
		i := slices.IndexFunc(ours, func(o json.RawMessage) bool { return bytes.Contains(o, []byte(`"traceID":"`+jt.TraceID+`"`)) })
		if i < 0 {
			t.Fatalf("trace %s not found", jt.TraceID)
		}
		compareJaeger(t, ours[i], raw)
	}
	code, b, _ := e.do("GET", "/api/traces?limit=20", "")
	if code != http.StatusBadRequest || !jsonEqual(t, b, fixture(t, "api-traces-search-400.json")) {
		t.Errorf("no service: %d %s; want Jaeger's %s", code, b, fixture(t, "api-traces-search-400.json"))
	}
	// Nothing found: data is [].
	body = e.get("/api/traces?service=nobody&start=0", nil)
	if !bytes.HasPrefix(body, []byte(`{"data":[],"total":0,`)) {
		t.Errorf("empty search: %s", body)
	}
}

// TestJaegerServicesAndOperations: the services and operations of the
// same workload as Jaeger's recording, in Jaeger's shapes; operations
// carry their span kinds (Badger leaves them empty) and spanKind filters.
func TestJaegerServicesAndOperations(t *testing.T) {
	e := newEnv(t, nil, shop(20, time.Now().Add(-time.Hour))...)
	for _, c := range []struct{ path, fixture string }{
		{"/api/services", "api-services.json"},
		{"/api/services/svc-1/operations", "api-services-svc-1-operations.json"},
	} {
		body := e.get(c.path, nil)
		if !jsonEqual(t, body, fixture(t, c.fixture)) {
			t.Errorf("%s:\n%s\nJaeger:\n%s", c.path, body, fixture(t, c.fixture))
		}
		if !slices.Equal(keys(t, body), keys(t, fixture(t, c.fixture))) {
			t.Errorf("%s: keys %v", c.path, keys(t, body))
		}
	}
	// /api/operations: Badger's order (by name), the memory store's kinds.
	var badger, memory, got struct{ Data []jOperation }
	json.Unmarshal(fixture(t, "api-operations.json"), &badger)
	json.Unmarshal(fixture(t, "api-operations-memory.json"), &memory)
	body := e.get("/api/operations?service=svc-1", &got)
	if len(got.Data) != len(badger.Data) {
		t.Fatalf("operations %s", body)
	}
	for i, op := range got.Data {
		if op.Name != badger.Data[i].Name || !slices.Contains(memory.Data, op) {
			t.Errorf("operation %d: %+v; want name %s with the memory store's kind", i, op, badger.Data[i].Name)
		}
	}
	e.get("/api/operations?service=svc-1&spanKind=server", &got)
	if len(got.Data) != 2 || got.Data[0].SpanKind != "server" {
		t.Errorf("spanKind=server: %+v", got.Data)
	}
	if code, _, _ := e.do("GET", "/api/operations", ""); code != http.StatusBadRequest {
		t.Errorf("operations without service: %d", code)
	}
}

// TestJaegerSearchFilters: operation, tags, minDuration and maxDuration
// select traces by a span of the named service that satisfies all of
// them (Jaeger's Badger store takes the duration of any span).
func TestJaegerSearchFilters(t *testing.T) {
	traces := shop(30, time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	count := func(q url.Values) int {
		q.Set("start", "0")
		var got struct{ Data []jTrace }
		e.get("/api/traces?"+q.Encode(), &got)
		return len(got.Data)
	}
	for _, c := range []struct {
		q    url.Values
		want int
	}{
		{url.Values{"service": {"svc-1"}}, 30},
		{url.Values{"service": {"svc-1"}, "operation": {"GET /svc-1/op2"}}, 15},
		// svc-0's root lasts 7ms; svc-1's spans at most 4.8ms: a
		// per-trace duration would find all 30.
		{url.Values{"service": {"svc-1"}, "minDuration": {"5ms"}}, 0},
		{url.Values{"service": {"svc-0"}, "minDuration": {"5ms"}}, 30},
		{url.Values{"service": {"svc-1"}, "maxDuration": {"100us"}}, 0},
		{url.Values{"service": {"svc-1"}, "tags": {`{"error":"true"}`}}, 3},
		{url.Values{"service": {"svc-0"}, "tags": {`{"error":"true"}`}}, 0},
		{url.Values{"service": {"svc-1"}, "tags": {`{"db.system":"postgresql","span.kind":"client"}`}}, 30},
		{url.Values{"service": {"svc-1"}, "tag": {"otel.status_description:deadlock detected"}}, 3},
		{url.Values{"service": {"svc-2"}, "tags": {`{"db.system":"postgresql"}`}}, 0},
		{url.Values{"service": {"svc-0"}, "tags": {`{"http.status_code":"200"}`}}, 30},
		{url.Values{"service": {"svc-1"}, "limit": {"7"}}, 7},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("%v: %d traces, want %d", c.q, got, c.want)
		}
	}
	for _, bad := range []url.Values{
		{"service": {"svc-1"}, "minDuration": {"fast"}},
		{"service": {"svc-1"}, "tags": {"{"}},
		{"service": {"svc-1"}, "start": {"yesterday"}},
		{"service": {"svc-1"}, "limit": {"-1"}},
		{"service": {"svc-1"}, "start": {"20"}, "end": {"10"}},
	} {
		code, b, _ := e.do("GET", "/api/traces?"+bad.Encode(), "")
		var env rawEnvelope
		json.Unmarshal(b, &env)
		if code != http.StatusBadRequest || len(env.Errors) != 1 || env.Errors[0].Msg == "" {
			t.Errorf("%v: %d %s; want a 400 saying why", bad, code, b)
		}
	}
	// Several traces by id (Jaeger's UI compares traces so).
	var got struct{ Data []jTrace }
	e.get("/api/traces?traceID="+jaegerID(traces[0].ID)+"&traceID="+jaegerID(traces[1].ID), &got)
	if len(got.Data) != 2 {
		t.Errorf("by traceID: %d traces", len(got.Data))
	}
}

// TestJaegerDependencies: every cross-service parent→child call is
// counted, exactly (Jaeger's Badger store says 100 for every edge, from
// the newest 100 traces); same-service calls are not edges. The shape is
// Jaeger's.
func TestJaegerDependencies(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	traces := shop(250, base)
	e := newEnv(t, nil, traces...)
	want := map[[2]string]int64{}
	for _, tr := range traces {
		for _, s := range tr.Spans {
			if s.Parent >= 0 && tr.Spans[s.Parent].Service != s.Service {
				want[[2]string{tr.Spans[s.Parent].Service, s.Service}]++
			}
		}
	}
	body := e.get("/api/dependencies?endTs="+strconv.FormatInt(time.Now().UnixMilli(), 10)+"&lookback=7200000", nil)
	if !slices.Equal(keys(t, body), keys(t, fixture(t, "api-dependencies.json"))) {
		t.Errorf("keys %v", keys(t, body))
	}
	var got struct {
		Data  []json.RawMessage
		Total int
	}
	json.Unmarshal(body, &got)
	var theirs struct{ Data []json.RawMessage }
	json.Unmarshal(fixture(t, "api-dependencies.json"), &theirs)
	if len(got.Data) != len(want) || got.Total != len(want) {
		t.Fatalf("%d edges (total %d), want %d: %s", len(got.Data), got.Total, len(want), body)
	}
	for i, raw := range got.Data {
		if !slices.Equal(keys(t, raw), keys(t, theirs.Data[0])) {
			t.Errorf("dependency keys %v, Jaeger's %v", keys(t, raw), keys(t, theirs.Data[0]))
		}
		var d jDependency
		json.Unmarshal(raw, &d)
		if d.CallCount != want[[2]string{d.Parent, d.Child}] || d.Parent == d.Child {
			t.Errorf("edge %d: %+v, want %d calls", i, d, want[[2]string{d.Parent, d.Child}])
		}
	}
	if want[[2]string{"svc-0", "svc-1"}] != 250 || want[[2]string{"svc-1", "svc-2"}] != 250 {
		t.Fatalf("oracle %v", want)
	}
	// The window: traces before it are not counted.
	e.get("/api/dependencies?endTs="+strconv.FormatInt(base.Add(-time.Minute).UnixMilli(), 10)+"&lookback=60000", &got)
	if len(got.Data) != 0 {
		t.Errorf("an empty window has %d edges", len(got.Data))
	}
}

// TestCatalogFollowsNewTraces: services and operations of traces stored
// after the first request appear at the next one (no refresh period),
// also those of a trace that reaches the store late (it started before
// the newest trace stored), and survive reopening the store.
func TestCatalogFollowsNewTraces(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	e := newEnv(t, nil, shop(5, base)...)
	var got struct{ Data []string }
	e.get("/api/services", &got)
	if len(got.Data) != 5 {
		t.Fatalf("services %v", got.Data)
	}
	add := func(svc string, at time.Time) {
		tr := build(trace.ID{Hi: 9, Lo: uint64(at.UnixNano())}, []trace.Span{span(1, 0, svc, "work", trace.KindServer, at, time.Millisecond)})
		if _, err := e.st.Append([]*trace.Trace{tr}); err != nil {
			t.Fatal(err)
		}
		e.st.Sync()
	}
	add("svc-new", base.Add(time.Second))
	add("svc-late", base.Add(-30*time.Second)) // started before the newest trace stored
	e.get("/api/services", &got)
	if !slices.Contains(got.Data, "svc-new") || !slices.Contains(got.Data, "svc-late") || len(got.Data) != 7 {
		t.Errorf("services after two more traces: %v", got.Data)
	}
	e.get("/api/services/svc-new/operations", &got)
	if !slices.Equal(got.Data, []string{"work"}) {
		t.Errorf("operations %v", got.Data)
	}
	// Reopened, the store knows its catalogue without reading a trace.
	dir := e.st.Dir()
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if svcs := st.Services(); len(svcs) != 7 || !slices.Contains(svcs, "svc-late") {
		t.Errorf("services after reopening: %v", svcs)
	}
	if ops := st.Operations("svc-new"); len(ops) != 1 || ops[0].Name != "work" || ops[0].Kind != trace.KindServer {
		t.Errorf("operations after reopening: %v", ops)
	}
}

// TestEveryServiceFindsItsTraces: every service /api/services lists finds
// at least one trace with /api/traces?service=, also the traces whose
// spans name no service (nor host) and those of an OpenTelemetry SDK's
// default resource (unknown_service:<executable>); the Hosts list names
// the partition of service-less traces as Jaeger names their service.
func TestEveryServiceFindsItsTraces(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	nameless := func(s trace.Span) trace.Span { s.Service, s.Host = "", ""; return s }
	traces := append(shop(3, base),
		// No service.name, no host.name.
		build(trace.ID{Hi: 5, Lo: 1}, []trace.Span{nameless(span(1, 0, "", "main", trace.KindInternal, base, time.Millisecond))}),
		// The Go SDK's default resource, no host.
		build(trace.ID{Hi: 5, Lo: 2}, []trace.Span{func() trace.Span {
			s := span(1, 0, "unknown_service:prog", "main", trace.KindInternal, base.Add(time.Second), time.Millisecond)
			s.Host = ""
			return s
		}()}),
		// A host and no service.
		build(trace.ID{Hi: 5, Lo: 3}, []trace.Span{func() trace.Span {
			s := span(1, 0, "", "main", trace.KindInternal, base.Add(2*time.Second), time.Millisecond)
			s.Host = "lonely-host"
			return s
		}()}),
		// A nameless root with a named child.
		build(trace.ID{Hi: 5, Lo: 4}, []trace.Span{
			nameless(span(1, 0, "", "main", trace.KindServer, base.Add(3*time.Second), 10*time.Millisecond)),
			span(2, 1, "svc-child", "work", trace.KindClient, base.Add(3*time.Second+time.Millisecond), time.Millisecond),
		}),
	)
	e := newEnv(t, nil, traces...)
	var svcs struct{ Data []string }
	e.get("/api/services", &svcs)
	for _, want := range []string{trace.UnknownService, "unknown_service:prog", "lonely-host", "svc-child", "svc-0"} {
		if !slices.Contains(svcs.Data, want) {
			t.Errorf("/api/services %v: no %q", svcs.Data, want)
		}
	}
	start := strconv.FormatInt(base.Add(-time.Minute).UnixMicro(), 10)
	for _, svc := range svcs.Data {
		var got struct{ Data []jTrace }
		e.get("/api/traces?start="+start+"&service="+url.QueryEscape(svc), &got)
		if len(got.Data) == 0 {
			t.Errorf("service %q is listed and finds no trace", svc)
			continue
		}
		for _, tr := range got.Data {
			found := false
			for _, p := range tr.Processes {
				found = found || p.ServiceName == svc
			}
			if !found {
				t.Errorf("service %q finds trace %s without a process of it", svc, tr.TraceID)
			}
		}
	}
	// Every trace of the service: those with no named span at all and
	// the one whose nameless root calls a named service.
	var unknown struct{ Data []jTrace }
	e.get("/api/traces?start="+start+"&service="+trace.UnknownService, &unknown)
	var ids []string
	for _, tr := range unknown.Data {
		ids = append(ids, tr.TraceID)
	}
	slices.Sort(ids)
	if want := []string{"00000000000000050000000000000001", "00000000000000050000000000000004"}; !slices.Equal(ids, want) {
		t.Errorf("service %s finds %v, want %v", trace.UnknownService, ids, want)
	}
	var hosts HostList
	e.get("/api/v1/hosts", &hosts)
	for _, h := range hosts.Hosts {
		if h.Name != trace.UnknownService && strings.HasPrefix(h.Name, "unknown") && h.Name != "unknown_service:prog" {
			t.Errorf("host %q: service-less traces are %q", h.Name, trace.UnknownService)
		}
	}
}
