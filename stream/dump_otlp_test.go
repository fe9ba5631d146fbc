package stream

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestOTLPKeepsResources: a trace written as OTLP JSON (dump --format
// otlp-json) and read back by the OTLP decoder has its spans' resources
// and scopes again, every attribute; spans without them get service.name
// and host.name and the scope "tracebridge".
func TestOTLPKeepsResources(t *testing.T) {
	res := &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "shop", Type: trace.TypeString},
		{Key: "deployment.environment", Value: "prod", Type: trace.TypeString}, {Key: "process.pid", Value: "4711", Type: trace.TypeInt}}}
	sc := &trace.Scope{Name: "shop/cart", Version: "0.9.0", Attributes: []trace.Attr{{Key: "team", Value: "payments", Type: trace.TypeString}}}
	tr := &trace.Trace{ID: trace.ID{Hi: 1, Lo: 2}, Resources: []*trace.Resource{res}, Scopes: []*trace.Scope{sc}, Spans: []trace.Span{
		{SpanID: 1, Parent: -1, Operation: "GET /cart", Service: "shop", Host: "shop", Component: "shop/cart", Start: 10, End: 20, Resource: res, Scope: sc},
		{SpanID: 2, ParentID: 1, Parent: 0, Operation: "SELECT", Service: "db", Host: "db-1", Start: 11, End: 12},
	}}
	line := appendOTLPLine(nil, tr)
	var b record.Batch
	if _, err := otlp.NewDecoder(otlp.Options{}).DecodeJSON(line, &b, nil); err != nil {
		t.Fatalf("%v\n%s", err, line)
	}
	if b.Len() != 2 {
		t.Fatalf("%d spans\n%s", b.Len(), line)
	}
	for i := range b.Records {
		r := &b.Records[i]
		got, scope := trace.ResourceAttrs(r), trace.ScopeOf(r)
		switch r.Values[trace.SpanName].Str() {
		case "GET /cart":
			if !(&trace.Resource{Attributes: got}).Equal(res) || !scope.Equal(sc) {
				t.Errorf("GET /cart: resource %v scope %+v\n%s", got, scope, line)
			}
			if a := pairsOf(r); len(a) != 0 {
				t.Errorf("GET /cart: span attributes %v (the component is the scope's name)", a)
			}
		case "SELECT":
			want := &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "db", Type: trace.TypeString}, {Key: "host.name", Value: "db-1", Type: trace.TypeString}}}
			if !(&trace.Resource{Attributes: got}).Equal(want) || scope == nil || scope.Name != "tracebridge" {
				t.Errorf("SELECT: resource %v scope %+v", got, scope)
			}
		}
	}
}

func pairsOf(r *record.Record) []record.Value {
	if l := r.Values[trace.SpanAttributes].List(); l != nil {
		return l.Items
	}
	return nil
}
