package main

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

const namesConfig = `flush_interval: 100ms
traces: {window: 200ms}
receivers:
  - {name: otlp, type: otlp-http, listen: "127.0.0.1:0"}
sinks:
  - {type: store, path: store}
`

// sdkTracer is a tracer of the OpenTelemetry SDK with the resource res
// exporting each span over OTLP/HTTP to addr as it ends.
func sdkTracer(t *testing.T, addr string, res *resource.Resource) oteltrace.Tracer {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp.Tracer("tracebridge-test")
}

// TestOTLPServiceNamesAgree: spans of a resource without service.name and
// of the Go SDK's default resource (service.name
// unknown_service:<executable>) have one service name in Jaeger's service
// list, the REST search and the host table; every service Jaeger lists
// finds its traces.
func TestOTLPServiceNamesAgree(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, namesConfig), "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	def := resource.Default()
	defName := ""
	for _, kv := range def.Attributes() {
		if kv.Key == "service.name" {
			defName = kv.Value.AsString()
		}
	}
	if !strings.HasPrefix(defName, "unknown_service:") {
		t.Fatalf("the SDK's default service.name is %q", defName)
	}
	for _, tr := range []oteltrace.Tracer{sdkTracer(t, p.Addr("otlp"), resource.Empty()), sdkTracer(t, p.Addr("otlp"), def)} {
		for range 2 {
			ctx, root := tr.Start(context.Background(), "main")
			_, child := tr.Start(ctx, "work")
			child.End()
			root.End()
		}
	}
	type summary struct{ Host, Service, TraceID string }
	var traces struct{ Traces []summary }
	// Wait for all four (a trace that no search finds fails here).
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, b := apiGet(t, "GET", base+"/api/v1/traces?limit=100", "", "")
		if code == 200 && json.Unmarshal(b, &traces) == nil && len(traces.Traces) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the REST search finds %d of the 4 traces: %+v", len(traces.Traces), traces.Traces)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var svcs struct{ Data []string }
	code, b := apiGet(t, "GET", base+"/api/services", "", "")
	if code != 200 || json.Unmarshal(b, &svcs) != nil {
		t.Fatalf("/api/services: %d %s", code, b)
	}
	slices.Sort(svcs.Data)
	if want := []string{"unknown_service", defName}; !slices.Equal(svcs.Data, want) {
		t.Errorf("/api/services %v, want %v", svcs.Data, want)
	}
	for _, svc := range svcs.Data {
		var got struct{ Data []json.RawMessage }
		code, b := apiGet(t, "GET", base+"/api/traces?service="+url.QueryEscape(svc), "", "")
		if code != 200 || json.Unmarshal(b, &got) != nil || len(got.Data) != 2 {
			t.Errorf("service %q is listed; /api/traces finds %d traces (%d %.300s), want 2", svc, len(got.Data), code, b)
		}
	}
	// The REST search and the host table name them the same.
	for _, s := range traces.Traces {
		if !slices.Contains(svcs.Data, s.Service) || s.Host != s.Service {
			t.Errorf("trace %s: service %q on host %q in REST, Jaeger lists %v", s.TraceID, s.Service, s.Host, svcs.Data)
		}
	}
	var hosts struct{ Hosts []struct{ Name string } }
	code, b = apiGet(t, "GET", base+"/api/v1/hosts", "", "")
	if code != 200 || json.Unmarshal(b, &hosts) != nil {
		t.Fatalf("/api/v1/hosts: %d %s", code, b)
	}
	var names []string
	for _, h := range hosts.Hosts {
		names = append(names, h.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, svcs.Data) {
		t.Errorf("hosts %v, Jaeger's services %v", names, svcs.Data)
	}
}
