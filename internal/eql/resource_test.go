package eql

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestResourceAndScopeAttributes: an identifier names the span's
// attribute, else its OpenTelemetry resource's, else its scope's
// (otel.scope.name and otel.scope.version its name and version); a
// resource int is a number.
func TestResourceAndScopeAttributes(t *testing.T) {
	tr := otlpTrace()
	res := &trace.Resource{Attributes: []trace.Attr{{Key: "deployment.environment", Value: "prod", Type: trace.TypeString},
		{Key: "process.pid", Value: "4711", Type: trace.TypeInt}, {Key: "http.method", Value: "resource's", Type: trace.TypeString}}}
	sc := &trace.Scope{Name: "io.opentelemetry.jdbc", Version: "2.1.0", Attributes: []trace.Attr{{Key: "team", Value: "db", Type: trace.TypeString}}}
	tr.Resources, tr.Scopes = []*trace.Resource{res}, []*trace.Scope{sc}
	tr.Spans[0].Resource = res
	tr.Spans[1].Resource, tr.Spans[1].Scope = res, sc
	for _, tc := range []struct {
		expr string
		span int
		want bool
	}{
		{`deployment.environment = 'prod'`, 0, true},
		{`deployment.environment = 'dev'`, 0, false},
		{`process.pid > 4000`, 1, true},
		{`http.method = 'GET'`, 0, true}, // the span's own attribute first
		{`team = 'db' and otel.scope.version = '2.1.0'`, 1, true},
		{`team = null and otel.scope.name = null`, 0, true},
		{`otel.scope.name ~= 'jdbc$'`, 1, true},
	} {
		e, err := Parse(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if got := e.Match(tr, &tr.Spans[tc.span]); got != tc.want {
			t.Errorf("%s on span %d = %v, want %v", tc.expr, tc.span, got, tc.want)
		}
	}
}
