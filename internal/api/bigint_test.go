package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// bigKieker is a Kieker traceId above 2^53: JavaScript's JSON.parse
// reads it as 4658150164341457000.
const bigKieker int64 = 4658150164341456896

// bigTraces are traces whose identifiers JavaScript cannot hold as
// numbers: a Kieker trace of operation execution records and one of
// events, both with traceId bigKieker and bigKieker+1, and an OTLP
// trace with int attributes and event attributes at ±2^63 and 2^53+1.
func bigTraces(base time.Time) []*trace.Trace {
	var out []*trace.Trace
	huge := []trace.Attr{
		{Key: "big.max", Value: strconv.FormatInt(1<<63-1, 10), Type: trace.TypeInt},
		{Key: "big.min", Value: strconv.FormatInt(-1<<63, 10), Type: trace.TypeInt},
		{Key: "big.unsafe", Value: strconv.FormatInt(1<<53+1, 10), Type: trace.TypeInt},
		{Key: "big.safe", Value: strconv.FormatInt(1<<53-1, 10), Type: trace.TypeInt},
	}
	for k, src := range []trace.Source{trace.FromExecution, trace.FromEvents} {
		kid := bigKieker + int64(k)
		at := base.Add(time.Duration(k) * time.Millisecond)
		root := trace.Span{SpanID: trace.SpanID(uint64(kid)<<8 | 1), Host: "alpha", Service: "alpha", Operation: "public void shop.Cart.checkout()", Component: "shop.Cart",
			Start: at.UnixNano(), End: at.Add(3 * time.Millisecond).UnixNano(), Source: src, KiekerTrace: kid, Thread: "7",
			Session: "S-4658150164341456896", Attributes: huge}
		kid1 := root
		kid1.SpanID, kid1.ParentID, kid1.Operation, kid1.Component = trace.SpanID(uint64(kid)<<8|2), root.SpanID, "private int shop.Dao.load(int)", "shop.Dao"
		kid1.Start, kid1.End, kid1.OrderIndex, kid1.EOI, kid1.ESS, kid1.Attributes, kid1.Error = at.Add(time.Millisecond).UnixNano(), at.Add(2*time.Millisecond).UnixNano(), 1, 1, 1, nil, true
		out = append(out, build(trace.KiekerID(kid), []trace.Span{root, kid1}))
	}
	id := trace.ID{Hi: 0x7f3a, Lo: 0x4658150164341456}
	root := span(1, 0, "svc-0", "GET /big", trace.KindServer, base.Add(5*time.Millisecond), 2*time.Millisecond, huge...)
	child := span(2, 1, "svc-1", "GET /bigger", trace.KindServer, base.Add(5500*time.Microsecond), time.Millisecond)
	child.Events = []trace.Event{{Name: "exception", Time: base.Add(6 * time.Millisecond).UnixNano(), Attributes: huge}}
	child.Links = []trace.Link{{TraceID: trace.KiekerID(bigKieker), SpanID: 0x4658150164341401, Attributes: huge}}
	out = append(out, build(id, []trace.Span{root, child}))
	return out
}

// maxSafe is Number.MAX_SAFE_INTEGER: JSON numbers beyond it are
// rounded by JavaScript (the web UI, Grafana, Jaeger's UI).
var maxSafe = big.NewInt(1<<53 - 1)

// unsafeNumbers returns the paths of the JSON numbers of raw that are
// integers beyond ±(2^53−1), except under the keys of timestamps:
// nanosecond times the UI reads only to the microsecond (docs/API.md).
func unsafeNumbers(t *testing.T, raw []byte, timestamps map[string]bool) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v: %.300s", err, raw)
	}
	var bad []string
	var walk func(path, key string, v any)
	walk = func(path, key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				walk(path+"."+k, k, y)
			}
		case []any:
			for i, y := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), key, y)
			}
		case json.Number:
			n, ok := new(big.Int).SetString(string(x), 10)
			if ok && new(big.Int).Abs(n).Cmp(maxSafe) > 0 && !timestamps[key] {
				bad = append(bad, path+" = "+string(x))
			}
		}
	}
	walk("$", "", v)
	return bad
}

// TestNoUnsafeIntegers: no answer of the API sends an integer that
// JavaScript would round, and each answer has the types the OpenAPI
// description declares (an id sent as a string is declared a string). Every GET route of the table that answers
// JSON is called, over Kieker traces whose traceIds are above 2^53 and
// spans with int attributes up to ±2^63, with every option that adds
// fields; a JSON number beyond ±(2^53−1) fails the test unless it is a
// documented nanosecond timestamp (start, end, time: the UI uses
// offsetNs and durationNs for what needs their last digits).
func TestNoUnsafeIntegers(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	traces := bigTraces(base)
	e := newEnv(t, nil, traces...)
	timestamps := map[string]bool{"start": true, "end": true, "time": true}
	kieker, events, otlp := traces[0].ID, traces[1].ID, traces[2].ID
	// Each GET route answering JSON with the values of its parameters
	// (several lists: each a separate call).
	window := fmt.Sprintf("start=%d&end=%d", base.UnixMicro()-1, base.Add(time.Second).UnixMicro())
	calls := map[string][]string{
		"/api/v1/traces":           {"", "deep&q=shop", "attr=kieker.traceId=" + strconv.FormatInt(bigKieker, 10)},
		"/api/v1/traces/{id}/view": {"attributes=true"}, "/api/v1/traces/{id}/find": {"q=shop", "q=" + strconv.FormatInt(bigKieker, 10)},
		"/api/v1/pivot":   {"key=big.max", "key=kieker.traceId"},
		"/api/v1/compare": {"a=" + kieker.String() + "&b=" + events.String(), "a=" + kieker.String() + "&b=" + otlp.Hex()},
		"/api/operations": {"service=alpha", "service=svc-0"},
		"/api/traces": {"service=alpha&" + window, "service=svc-0&" + window, "traceID=" + kieker.Hex() + "&traceID=" + otlp.Hex(),
			"service=alpha&" + window + "&tags=" + url.QueryEscape(`{"kieker.traceId":"4658150164341456896"}`)},
		"/api/dependencies":    {fmt.Sprintf("endTs=%d&lookback=3600000", base.Add(time.Second).UnixMilli())},
		"/api/v1/hosts/{name}": {""}, "/api/v1/analysis/graph": {"", "kind=aggregated-assembly-call-tree"},
	}
	// Routes that need a console, a cluster, a JFR stage or a text format.
	skip := map[string]bool{"/api/openapi.json": true, "/api/v1/profiles/flame": true, "/api/v1/profiles/views": true, "/api/v1/jfr/types": true, "/api/v1/jfr/events": true, "/api/v1/jfr/event": true, "/api/v1/status": true, "/api/v1/receivers": true,
		"/api/v1/receivers/{name}/mapping": true, "/api/v1/sinks": true, "/api/v1/component-types": true, "/api/v1/record-types": true, "/api/v1/cluster": true}
	var doc map[string]any
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	called, shown := 0, 0
	for _, rt := range routes {
		if rt.method != "GET" || rt.resp == "" || strings.Contains(rt.resp, "/") || skip[rt.path] {
			continue
		}
		paths := []string{rt.path}
		expand := func(name string, vals ...string) {
			var out []string
			for _, p := range paths {
				if !strings.Contains(p, "{"+name+"}") {
					out = append(out, p)
					continue
				}
				for _, v := range vals {
					out = append(out, strings.ReplaceAll(p, "{"+name+"}", url.PathEscape(v)))
				}
			}
			paths = out
		}
		expand("id", kieker.String(), events.String(), otlp.Hex())
		expand("index", "0", "1")
		expand("traceID", kieker.Hex(), events.Hex(), otlp.Hex())
		expand("service", "alpha", "svc-0")
		expand("name", "alpha")
		queries := calls[rt.path]
		if queries == nil {
			queries = []string{""}
		}
		for _, p := range paths {
			for _, q := range queries {
				u := p
				if q != "" {
					u += "?" + q
				}
				code, b, hdr := e.do("GET", u, "")
				if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
					t.Errorf("GET %s: %d %s %.200s", u, code, hdr.Get("Content-Type"), b)
					continue
				}
				called++
				if bytes.Contains(b, []byte(strconv.FormatInt(bigKieker, 10))) {
					shown++
				}
				for _, bad := range unsafeNumbers(t, b, timestamps) {
					t.Errorf("GET %s: %s: a JSON number JavaScript rounds", u, bad)
				}
				for _, bad := range schemaMismatches(t, doc, ref(rt.resp), b) {
					t.Errorf("GET %s: %s", u, bad)
				}
			}
		}
	}
	t.Logf("%d answers checked, %d with the Kieker traceId", called, shown)
	if called < 40 || shown < 20 {
		t.Errorf("only %d answers checked, %d with the Kieker traceId %d", called, shown, bigKieker)
	}
}

// TestBigIdsExact: the Kieker traceId above 2^53 reaches a JSON reader
// exactly, as a string, in each place the API shows it: the span
// detail's kieker.traceId, the trace JSON's kieker.traceId attribute,
// Jaeger's kieker.traceId tag (a string tag, as Jaeger itself sends an
// int64 beyond 2^53), the search's trace ids; int attributes beyond
// 2^53 are strings with their type still "int", the safe ones numbers.
func TestBigIdsExact(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	traces := bigTraces(base)
	e := newEnv(t, nil, traces...)
	want := strconv.FormatInt(bigKieker, 10)
	for _, tr := range traces[:2] {
		kid := tr.ID.String()
		var d struct {
			Kieker struct {
				TraceID any `json:"traceId"`
			} `json:"kieker"`
			Attributes []struct {
				Key, Type string
				Value     any
			} `json:"attributes"`
		}
		e.get("/api/v1/traces/"+kid+"/spans/1", &d)
		if d.Kieker.TraceID != kid {
			t.Errorf("span detail of %s: kieker.traceId %#v, want the string %q", kid, d.Kieker.TraceID, kid)
		}
		var root struct {
			Attributes []struct {
				Key, Type string
				Value     any
			} `json:"attributes"`
		}
		e.get("/api/v1/traces/"+kid+"/spans/0", &root)
		got := map[string]string{}
		for _, a := range root.Attributes {
			got[a.Key] = fmt.Sprintf("%s %#v", a.Type, a.Value)
		}
		for k, w := range map[string]string{"big.max": `int64 "9223372036854775807"`, "big.min": `int64 "-9223372036854775808"`,
			"big.unsafe": `int64 "9007199254740993"`, "big.safe": "int64 9.007199254740991e+15"} {
			if got[k] != w {
				t.Errorf("span 0 of %s: attribute %s is %s, want %s", kid, k, got[k], w)
			}
		}
		var whole struct {
			TraceID string `json:"traceId"`
			Spans   []struct {
				Attributes map[string]any `json:"attributes"`
			} `json:"spans"`
		}
		e.get("/api/v1/traces/"+kid, &whole)
		if whole.TraceID != kid || whole.Spans[1].Attributes["kieker.traceId"] != kid || whole.Spans[0].Attributes["big.max"] != "9223372036854775807" {
			t.Errorf("trace JSON of %s: traceId %q, kieker.traceId %#v, big.max %#v", kid, whole.TraceID, whole.Spans[1].Attributes["kieker.traceId"], whole.Spans[0].Attributes["big.max"])
		}
		var j struct {
			Data []struct {
				Spans []struct {
					Tags []struct {
						Key, Type string
						Value     any
					} `json:"tags"`
				} `json:"spans"`
			} `json:"data"`
		}
		e.get("/api/traces/"+tr.ID.Hex(), &j)
		tags := map[string]string{}
		for _, tg := range j.Data[0].Spans[0].Tags {
			tags[tg.Key] = fmt.Sprintf("%s %#v", tg.Type, tg.Value)
		}
		for k, w := range map[string]string{"kieker.traceId": fmt.Sprintf("string %q", kid), "big.max": `string "9223372036854775807"`,
			"big.safe": "int64 9.007199254740991e+15"} {
			if tags[k] != w {
				t.Errorf("Jaeger trace %s: tag %s is %s, want %s", tr.ID.Hex(), k, tags[k], w)
			}
		}
	}
	var found struct {
		Data []struct {
			TraceID string `json:"traceID"`
		} `json:"data"`
	}
	e.get(fmt.Sprintf("/api/traces?service=alpha&start=%d&end=%d&tags=%s", base.UnixMicro()-1, base.Add(time.Second).UnixMicro(),
		url.QueryEscape(`{"kieker.traceId":"`+want+`"}`)), &found)
	if len(found.Data) != 1 || found.Data[0].TraceID != traces[0].ID.Hex() {
		t.Errorf("Jaeger search for the tag kieker.traceId=%s: %+v, want %s", want, found.Data, traces[0].ID.Hex())
	}
	var page SearchResult
	e.get("/api/v1/traces?attr=kieker.traceId="+want, &page)
	if len(page.Traces) != 1 || page.Traces[0].TraceID != want {
		t.Errorf("search kieker.traceId=%s: %+v", want, page.Traces)
	}
}

// TestSpanOffsetsExact: the span detail gives what the UI shows of its
// times exactly, where the unix ns start and time (the documented
// exception) are rounded by JavaScript to 256 ns: the span's offset from
// the trace's start and each event's offset from the span's start, here
// 1 ns and 3 ns.
func TestSpanOffsetsExact(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	root := span(1, 0, "svc-0", "GET /a", trace.KindServer, base, time.Millisecond)
	child := span(2, 1, "svc-0", "GET /b", trace.KindServer, base.Add(time.Nanosecond), time.Microsecond)
	child.Events = []trace.Event{{Name: "exception", Time: base.Add(4 * time.Nanosecond).UnixNano()}}
	tr := build(trace.ID{Hi: 1, Lo: 2}, []trace.Span{root, child})
	e := newEnv(t, nil, tr)
	var d struct {
		Start    json.Number `json:"start"`
		OffsetNs json.Number `json:"offsetNs"`
		Events   []struct {
			OffsetNs json.Number `json:"offsetNs"`
		} `json:"events"`
	}
	e.get("/api/v1/traces/"+tr.ID.Hex()+"/spans/1", &d)
	if d.OffsetNs != "1" || len(d.Events) != 1 || d.Events[0].OffsetNs != "3" {
		t.Errorf("span 1: offsetNs %q, events %+v; want 1 and an event at 3", d.OffsetNs, d.Events)
	}
}

// schemaMismatches returns where the JSON raw does not have the types
// that schema (of the OpenAPI document doc) declares: each "type" met
// on the way down properties, items, additionalProperties and $ref.
func schemaMismatches(t *testing.T, doc map[string]any, schema map[string]any, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	var bad []string
	var check func(path string, s map[string]any, v any)
	check = func(path string, s map[string]any, v any) {
		if r, ok := s["$ref"].(string); ok {
			s, _ = schemas[strings.TrimPrefix(r, "#/components/schemas/")].(map[string]any)
			if s == nil {
				bad = append(bad, path+": no schema "+r)
				return
			}
		}
		var types []string
		switch ty := s["type"].(type) {
		case string:
			types = []string{ty}
		case []any:
			for _, x := range ty {
				types = append(types, x.(string))
			}
		}
		got := "null"
		switch x := v.(type) {
		case string:
			got = "string"
		case bool:
			got = "boolean"
		case json.Number:
			got = "number"
			if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				got = "integer"
			}
		case []any:
			got = "array"
		case map[string]any:
			got = "object"
		}
		if len(types) > 0 {
			ok := false
			for _, ty := range types {
				ok = ok || ty == got || (ty == "number" && got == "integer")
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("%s is %s, the OpenAPI description says %v", path, got, types))
				return
			}
		}
		switch x := v.(type) {
		case []any:
			if items, ok := s["items"].(map[string]any); ok {
				for i, y := range x {
					check(fmt.Sprintf("%s[%d]", path, i), items, y)
				}
			}
		case map[string]any:
			props, _ := s["properties"].(map[string]any)
			extra, _ := s["additionalProperties"].(map[string]any)
			for k, y := range x {
				if p, ok := props[k].(map[string]any); ok {
					check(path+"."+k, p, y)
				} else if extra != nil {
					check(path+"."+k, extra, y)
				}
			}
		}
	}
	check("$", schema, v)
	return bad
}
