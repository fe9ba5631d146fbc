package otlp

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// otlpTrace is a trace as OTLP spans make it: two services, one on two
// hosts, every attribute type, events, links, an error, a consumer.
func otlpTrace() *trace.Trace {
	id := trace.ID{Hi: 0x5b8efff798038103, Lo: 0xd269b633813fc60c}
	other := trace.ID{Hi: 1, Lo: 2}
	t0 := int64(1795500000123456789)
	span := func(sid, parent trace.SpanID, p int32, op, svc, host string, start, end int64) trace.Span {
		return trace.Span{SpanID: sid, ParentID: parent, Parent: p, Operation: op, Service: svc, Host: host,
			Start: t0 + start, End: t0 + end, Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1}
	}
	frontend := &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "frontend", Type: trace.TypeString},
		{Key: "host.name", Value: "web-1", Type: trace.TypeString}, {Key: "process.pid", Value: "4242", Type: trace.TypeInt}}}
	checkout := &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "checkout", Type: trace.TypeString},
		{Key: "host.name", Value: "web-2", Type: trace.TypeString}, {Key: "deployment.environment", Value: "prod", Type: trace.TypeString}}}
	nethttp := &trace.Scope{Name: "net/http", Version: "1.26", Attributes: []trace.Attr{{Key: "team", Value: "web", Type: trace.TypeString}}}
	grpc := &trace.Scope{Name: "grpc"}
	root := span(1, 0, -1, "GET /cart", "frontend", "web-1", 0, 9_000_000)
	root.Resource, root.Scope = frontend, nethttp
	root.Kind = trace.KindServer
	root.Component = "net/http"
	root.Process = "4242"
	root.Attributes = []trace.Attr{
		{Key: "http.method", Value: "GET", Type: trace.TypeString},
		{Key: "ok", Value: "true", Type: trace.TypeBool},
		{Key: "big.id", Value: "4658150164341456896", Type: trace.TypeInt},
		{Key: "ratio", Value: "0.25", Type: trace.TypeDouble},
		{Key: "nan", Value: "NaN", Type: trace.TypeDouble},
		{Key: "blob", Value: "AAEC", Type: trace.TypeBytes},
		{Key: "list", Value: `[1,"a",true,2.5,null]`, Type: trace.TypeJSON},
		{Key: "map", Value: `{"a":{"b":[]},"z":"y"}`, Type: trace.TypeJSON},
	}
	root.Events = []trace.Event{{Name: "cache miss", Time: t0 + 100, Attributes: []trace.Attr{{Key: "key", Value: "k1", Type: trace.TypeString}}}}
	pay := span(2, 1, 0, "Pay", "checkout", "web-2", 1_000_000, 8_000_000)
	pay.Resource, pay.Scope = checkout, grpc
	pay.Kind = trace.KindClient
	pay.Component = "grpc"
	pay.Status = trace.StatusError
	pay.Error = true
	pay.StatusMessage = "card declined"
	pay.Links = []trace.Link{{TraceID: other, SpanID: 7, TraceState: "k=v", Attributes: []trace.Attr{{Key: "why", Value: "retry", Type: trace.TypeString}}}}
	db := span(3, 2, 1, "SELECT", "checkout", "web-2", 2_000_000, 3_000_000)
	db.Resource = checkout // and no scope
	db.Kind = trace.KindClient
	db.Component = "db.Dao"
	db.Attributes = []trace.Attr{{Key: "code.namespace", Value: "db.Dao", Type: trace.TypeString}}
	fe := span(4, 1, 0, "render", "frontend", "web-1", 8_000_000, 9_000_000)
	fe.Resource, fe.Scope = frontend, nethttp
	fe.Component = "net/http"
	fe.Process = "4242"
	fe.Status = trace.StatusOK
	return &trace.Trace{ID: id, Spans: []trace.Span{root, pay, db, fe},
		Resources: []*trace.Resource{frontend, checkout}, Scopes: []*trace.Scope{nethttp, grpc}}
}

// withoutOrigins is t as a block written before resources were kept
// reads: no resources or scopes.
func withoutOrigins(t *trace.Trace) *trace.Trace {
	t.Resources, t.Scopes = nil, nil
	for i := range t.Spans {
		t.Spans[i].Resource, t.Spans[i].Scope = nil, nil
	}
	return t
}

// TestTraceJSONRoundTrip: the OTLP/JSON of a trace of OTLP spans reads
// back through DecodeJSON and the assembler into the same trace: its
// resources and scopes with every attribute; a trace without them (as
// blocks from before resources were kept read) into the same spans, with
// the resources and scopes made of their services, hosts, processes and
// components.
func TestTraceJSONRoundTrip(t *testing.T) {
	madeResources := func(got *trace.Trace) bool {
		var names []string
		for _, r := range got.Resources {
			a, _ := r.Attr("service.name")
			names = append(names, a.Value)
		}
		return cmp.Equal(names, []string{"frontend", "checkout"}) && len(got.Scopes) == 2 &&
			got.Scopes[0].Name == "net/http" && got.Scopes[1].Name == "grpc"
	}
	for _, tc := range []struct {
		name    string
		trace   *trace.Trace
		opts    []cmp.Option
		origins func(got *trace.Trace) bool
	}{
		{"resources", otlpTrace(), nil, nil},
		{"no resources", withoutOrigins(otlpTrace()), []cmp.Option{
			cmpopts.IgnoreFields(trace.Trace{}, "Resources", "Scopes"), cmpopts.IgnoreFields(trace.Span{}, "Resource", "Scope")}, madeResources},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.trace
			out := AppendTraceJSON(nil, want)
			if !json.Valid(out) {
				t.Fatalf("not JSON: %s", out)
			}
			d := NewDecoder(Options{})
			b := &record.Batch{}
			res, err := d.DecodeJSON(out, b, nil)
			if err != nil || res.Spans != len(want.Spans) || res.Rejected != 0 {
				t.Fatalf("decode: %+v %v\n%s", res, err, out)
			}
			var got *trace.Trace
			a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) { got = tr }})
			a.AddBatch(b)
			a.Flush()
			if got == nil {
				t.Fatal("no trace assembled")
			}
			// The decoder keeps the scope in Component when there is no
			// code.namespace; the assembler sets depths.
			for i := range want.Spans {
				want.Spans[i].Depth = got.Spans[i].Depth
			}
			opts := append([]cmp.Option{cmpopts.IgnoreUnexported(trace.Span{}), cmpopts.EquateEmpty()}, tc.opts...)
			if diff := cmp.Diff(want, got, opts...); diff != "" {
				t.Errorf("round trip (-want +got):\n%s\n%s", diff, out)
			}
			if tc.origins != nil && !tc.origins(got) {
				t.Errorf("resources %+v scopes %+v\n%s", got.Resources, got.Scopes, out)
			}
		})
	}
}

// TestTraceJSONIsOTLP: pdata, the collector's own OTLP/JSON reader, reads
// every span with its ids, times, kind, status, typed attributes, events
// and links; a Kieker call gets its service from its host and its class,
// thread and positions as attributes; resources group services, hosts
// and processes.
func TestTraceJSONIsOTLP(t *testing.T) {
	tr := otlpTrace()
	kieker := trace.Span{SpanID: 9, ParentID: 4, Parent: 3, Operation: "public void shop.Cart.add()", Component: "shop.Cart",
		Host: "kieker-host", Thread: "17", Session: "s1", Start: tr.Spans[3].Start, End: tr.Spans[3].End, Error: true,
		Source: trace.FromEvents, OrderIndex: 3, EOI: -1, ESS: -1, KiekerTrace: -42}
	tr.Spans = append(tr.Spans, kieker)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(AppendTraceJSON(nil, tr))
	if err != nil {
		t.Fatal(err)
	}
	if n := td.SpanCount(); n != len(tr.Spans) {
		t.Fatalf("%d spans, want %d", n, len(tr.Spans))
	}
	if n := td.ResourceSpans().Len(); n != 3 {
		t.Errorf("%d resources, want 3 (frontend, checkout, kieker-host)", n)
	}
	bySpan := map[trace.SpanID]ptrace.Span{}
	res := map[trace.SpanID]map[string]any{}
	scope := map[trace.SpanID]string{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				sid := s.SpanID()
				id := trace.SpanID(uint64FromBytes(sid[:]))
				bySpan[id] = s
				res[id] = rs.Resource().Attributes().AsRaw()
				scope[id] = ss.Scope().Name()
				if v := ss.Scope().Version(); v != "" {
					scope[id] += "@" + v
				}
				if a := ss.Scope().Attributes().AsRaw(); len(a) > 0 {
					scope[id] += fmt.Sprint(a)
				}
			}
		}
	}
	for i := range tr.Spans {
		w := &tr.Spans[i]
		s, ok := bySpan[w.SpanID]
		if !ok {
			t.Fatalf("span %s missing", w.SpanID)
		}
		tid := s.TraceID()
		if got := (trace.ID{Hi: uint64FromBytes(tid[:8]), Lo: uint64FromBytes(tid[8:])}); got != tr.ID {
			t.Errorf("span %s: trace id %s", w.SpanID, got.Hex())
		}
		pid := s.ParentSpanID()
		if got := trace.SpanID(uint64FromBytes(pid[:])); got != w.ParentID {
			t.Errorf("span %s: parent %s, want %s", w.SpanID, got, w.ParentID)
		}
		wantKind := w.Kind
		if w.Source != trace.FromSpan {
			wantKind = trace.KindInternal // a Kieker call
		}
		if s.Name() != w.Operation || int64(s.StartTimestamp()) != w.Start || int64(s.EndTimestamp()) != w.End || int(s.Kind()) != int(wantKind) {
			t.Errorf("span %s: %s %d-%d kind %d, want %s %d-%d kind %d", w.SpanID, s.Name(), s.StartTimestamp(), s.EndTimestamp(), s.Kind(),
				w.Operation, w.Start, w.End, wantKind)
		}
		if wantErr := w.Error; (s.Status().Code() == ptrace.StatusCodeError) != wantErr || s.Status().Message() != w.StatusMessage {
			t.Errorf("span %s: status %v %q, want error %v %q", w.SpanID, s.Status().Code(), s.Status().Message(), wantErr, w.StatusMessage)
		}
		wantSvc := w.Service
		if wantSvc == "" {
			wantSvc = w.Host
		}
		if res[w.SpanID]["service.name"] != wantSvc || res[w.SpanID]["host.name"] != w.Host {
			t.Errorf("span %s: resource %v", w.SpanID, res[w.SpanID])
		}
	}
	root := bySpan[1]
	attrs := root.Attributes().AsRaw()
	want := map[string]any{"http.method": "GET", "ok": true, "big.id": int64(4658150164341456896), "ratio": 0.25, "blob": []byte{0, 1, 2},
		"list": []any{int64(1), "a", true, 2.5, nil}, "map": map[string]any{"a": map[string]any{"b": []any{}}, "z": "y"}}
	nan, _ := root.Attributes().Get("nan")
	delete(attrs, "nan")
	if diff := cmp.Diff(want, attrs); diff != "" || nan.Type() != pcommon.ValueTypeDouble || nan.Double() == nan.Double() {
		t.Errorf("root attributes (-want +got):\n%s\nnan: %v", diff, nan.AsRaw())
	}
	if res[1]["process.pid"] != int64(4242) || scope[1] != "net/http@1.26map[team:web]" || res[2]["deployment.environment"] != "prod" || scope[2] != "grpc" {
		t.Errorf("root: resource %v, scope %q", res[1], scope[1])
	}
	if ev := root.Events(); ev.Len() != 1 || ev.At(0).Name() != "cache miss" || int64(ev.At(0).Timestamp()) != tr.Spans[0].Events[0].Time ||
		ev.At(0).Attributes().AsRaw()["key"] != "k1" {
		t.Errorf("root events: %d", ev.Len())
	}
	l := bySpan[2].Links()
	if l.Len() != 1 {
		t.Fatalf("pay links: %d", l.Len())
	}
	if lid := l.At(0).SpanID(); l.At(0).TraceState().AsRaw() != "k=v" || l.At(0).Attributes().AsRaw()["why"] != "retry" || uint64FromBytes(lid[:]) != 7 {
		t.Errorf("pay links: %d", l.Len())
	}
	k := bySpan[9].Attributes().AsRaw()
	wantK := map[string]any{"code.namespace": "shop.Cart", "thread.id": "17", "kieker.traceId": int64(-42), "kieker.orderIndex": int64(3), "kieker.sessionId": "s1"}
	if diff := cmp.Diff(wantK, k); diff != "" || scope[9] != "tracebridge" {
		t.Errorf("kieker span attributes (-want +got):\n%s\nscope %q", diff, scope[9])
	}
}

func uint64FromBytes(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
