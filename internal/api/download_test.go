package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestTraceDownloadFormats: format=jaeger is exactly what Jaeger's
// /api/traces/{id} answers, format=otlp is OTLP/JSON that the
// collector's reader takes with every span of the trace, for an OTLP
// trace and a Kieker trace (by its decimal id) alike.
func TestTraceDownloadFormats(t *testing.T) {
	traces := mixed(time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	for _, tr := range []*trace.Trace{traces[3], traces[len(traces)-1]} {
		id := tr.ID.String()
		_, jaeger, _ := e.do("GET", "/api/traces/"+tr.ID.Hex(), "")
		code, b, h := e.do("GET", "/api/v1/traces/"+id+"?format=jaeger", "")
		if code != 200 || !bytes.Equal(b, jaeger) || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s jaeger: %d %s\nwant Jaeger's %s", id, code, b, jaeger)
		}
		var env struct {
			Data []struct {
				TraceID string `json:"traceID"`
				Spans   []struct {
					SpanID string `json:"spanID"`
				} `json:"spans"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &env); err != nil || len(env.Data) != 1 || len(env.Data[0].Spans) != len(tr.Spans) || env.Data[0].TraceID != tr.ID.Hex() {
			t.Errorf("%s jaeger: %v, %d traces", id, err, len(env.Data))
		}

		code, b, h = e.do("GET", "/api/v1/traces/"+id+"?format=otlp", "")
		if code != 200 || h.Get("Content-Type") != "application/json" {
			t.Fatalf("%s otlp: %d %s", id, code, b)
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		if err != nil {
			t.Fatalf("%s otlp: %v\n%s", id, err, b)
		}
		var got, want []string
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if s.TraceID().String() != tr.ID.Hex() {
						t.Errorf("%s otlp: span of trace %s", id, s.TraceID())
					}
					got = append(got, s.SpanID().String()+" "+s.Name())
				}
			}
		}
		for i := range tr.Spans {
			want = append(want, tr.Spans[i].SpanID.String()+" "+tr.Spans[i].Operation)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s otlp spans %v, want %v", id, got, want)
		}
	}
	if code, b, _ := e.do("GET", "/api/v1/traces/"+traces[0].ID.String()+"?format=zipkin", ""); code != http.StatusBadRequest || !strings.Contains(string(b), "otlp") {
		t.Errorf("format=zipkin: %d %s", code, b)
	}
}

// TestOperationFilter: operation (of a service, or of any) selects the
// traces Jaeger's search selects for the same service and operation;
// /api/v1/names?service= lists the service's operations, as Jaeger's
// /api/services/{service}/operations.
func TestOperationFilter(t *testing.T) {
	traces := mixed(time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	search := func(p url.Values) []string {
		t.Helper()
		p.Set("limit", "1000")
		var r SearchResult
		e.get("/api/v1/traces?"+p.Encode(), &r)
		var out []string
		for _, s := range r.Traces {
			out = append(out, s.TraceID)
		}
		slices.Sort(out)
		return out
	}
	jaeger := func(p url.Values) []string {
		t.Helper()
		p.Set("limit", "1000")
		p.Set("start", "0")
		var env struct{ Data []jTrace }
		e.get("/api/traces?"+p.Encode(), &env)
		var out []string
		for _, jt := range env.Data {
			out = append(out, jt.TraceID)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		svc, op string
		n       int
	}{
		{"svc-1", "GET /svc-1/op1", 20},
		{"svc-1", "SELECT orders", 40},
		{"svc-0", "SELECT orders", 0}, // another service's operation
		{"", "GET /svc-1/op2", 20},
		{"", "private int shop.Dao.load(int)", 22}, // Kieker traces with a call below the root
	} {
		got := search(url.Values{"service": {c.svc}, "operation": {c.op}})
		if len(got) != c.n {
			t.Errorf("service %q operation %q: %d traces, want %d", c.svc, c.op, len(got), c.n)
		}
		if c.svc != "" {
			if want := jaeger(url.Values{"service": {c.svc}, "operation": {c.op}}); !slices.Equal(got, want) {
				t.Errorf("service %q operation %q: %v; Jaeger's search finds %v", c.svc, c.op, got, want)
			}
		}
	}
	var n Names
	e.get("/api/v1/names?service=svc-1", &n)
	want := []string{"GET /svc-1/op1", "GET /svc-1/op2", "GET svc-2", "GET svc-3", "GET svc-4", "SELECT orders"}
	if !slices.Equal(n.Operations, want) {
		t.Errorf("operations of svc-1: %v, want %v", n.Operations, want)
	}
	var jops struct{ Data []string }
	e.get("/api/services/svc-1/operations", &jops)
	if !slices.Equal(jops.Data, n.Operations) {
		t.Errorf("operations of svc-1: %v; Jaeger's API says %v", n.Operations, jops.Data)
	}
	if _, b, _ := e.do("GET", "/api/v1/names", ""); strings.Contains(string(b), "operations") {
		t.Errorf("names without service: %s", b)
	}
}
