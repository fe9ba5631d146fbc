package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

// TestOTLPResourceAttributes: every attribute of an OpenTelemetry
// resource (deployment.environment, service.version, process.*,
// telemetry.sdk.*) and of an instrumentation scope (name, version,
// attributes), sent by the real SDK, is stored, returned by the REST API
// (once per trace, spans referring to it) and by Jaeger's
// /api/traces/{id} as process and span tags, and found by
// --attr deployment.environment=prod (not by =dev) over the API, in
// Jaeger's tag search and in the store after the bridge stopped.
func TestOTLPResourceAttributes(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, namesConfig), "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	ctx := context.Background()
	ids := map[string]string{} // environment → trace id (hex)
	for _, env := range []string{"prod", "dev"} {
		res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithProcessPID(), resource.WithProcessRuntimeName(),
			resource.WithAttributes(semconv.ServiceName("shop"), semconv.ServiceVersion("2.4.1"), semconv.HostName("node-1"),
				attribute.String("deployment.environment", env), attribute.StringSlice("k8s.pod.labels", []string{"a", "b"})))
		if err != nil {
			t.Fatal(err)
		}
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(p.Addr("otlp")), otlptracehttp.WithInsecure(),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(exp))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		tr := tp.Tracer("shop/cart", oteltrace.WithInstrumentationVersion("0.9.0"),
			oteltrace.WithInstrumentationAttributes(attribute.String("team", "payments"), attribute.Int("tier", 1)))
		sctx, root := tr.Start(ctx, "GET /cart", oteltrace.WithSpanKind(oteltrace.SpanKindServer))
		for i := range 3 {
			_, child := tr.Start(sctx, "price#"+strconv.Itoa(i))
			child.End()
		}
		root.End()
		ids[env] = root.SpanContext().TraceID().String()
	}
	pid := strconv.Itoa(os.Getpid())

	// Both traces stored.
	type summary struct{ TraceID string }
	search := func(params string) []string {
		t.Helper()
		var page struct{ Traces []summary }
		code, b := apiGet(t, "GET", base+"/api/v1/traces?limit=100&"+params, "", "")
		if code != 200 || json.Unmarshal(b, &page) != nil {
			t.Fatalf("search %s: %d %s", params, code, b)
		}
		var out []string
		for _, s := range page.Traces {
			out = append(out, s.TraceID)
		}
		slices.Sort(out)
		return out
	}
	for deadline := time.Now().Add(30 * time.Second); len(search("")) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the REST search finds %v, want both traces %v", search(""), ids)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// REST: the trace holds its resource and scope once; every span
	// refers to them.
	var tr struct {
		Resources []struct{ Attributes map[string]any }
		Scopes    []struct {
			Name, Version string
			Attributes    map[string]any
		}
		Spans []struct {
			Resource, Scope *int
		}
	}
	code, b := apiGet(t, "GET", base+"/api/v1/traces/"+ids["prod"], "", "")
	if code != 200 || json.Unmarshal(b, &tr) != nil {
		t.Fatalf("GET trace: %d %s", code, b)
	}
	if len(tr.Resources) != 1 || len(tr.Scopes) != 1 || len(tr.Spans) != 4 {
		t.Fatalf("trace: %d resources, %d scopes, %d spans, want 1, 1, 4:\n%s", len(tr.Resources), len(tr.Scopes), len(tr.Spans), b)
	}
	want := map[string]any{
		"service.name": "shop", "service.version": "2.4.1", "host.name": "node-1", "deployment.environment": "prod",
		"process.pid": float64(os.Getpid()), "process.runtime.name": "go", "k8s.pod.labels": `["a","b"]`,
		"telemetry.sdk.language": "go", "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.version": sdkVersion(t),
	}
	got := tr.Resources[0].Attributes
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v && !(k == "k8s.pod.labels" && jsonEqual(g, v)) {
			t.Errorf("REST resource %s = %#v, want %#v", k, g, v)
		}
	}
	if sc := tr.Scopes[0]; sc.Name != "shop/cart" || sc.Version != "0.9.0" || sc.Attributes["team"] != "payments" || sc.Attributes["tier"] != float64(1) {
		t.Errorf("REST scope %+v", sc)
	}
	for i, s := range tr.Spans {
		if s.Resource == nil || *s.Resource != 0 || s.Scope == nil || *s.Scope != 0 {
			t.Errorf("REST span %d: resource %v scope %v, want 0 and 0", i, s.Resource, s.Scope)
		}
	}
	// One span in full carries them too.
	var span struct {
		Resource struct{ Attributes []struct{ Key string } }
		Scope    struct{ Name, Version string }
	}
	code, b = apiGet(t, "GET", base+"/api/v1/traces/"+ids["prod"]+"/spans/1", "", "")
	if code != 200 || json.Unmarshal(b, &span) != nil || len(span.Resource.Attributes) != len(got) || span.Scope.Version != "0.9.0" {
		t.Errorf("GET span: %d %s", code, b)
	}

	// Jaeger: the process's tags are the resource's attributes (but
	// service.name, its serviceName); the span's tags name the scope.
	var jt struct {
		Data []struct {
			Spans []struct {
				ProcessID string
				Tags      []struct {
					Key   string
					Value any
				}
			}
			Processes map[string]struct {
				ServiceName string
				Tags        []struct {
					Key   string
					Value any
				}
			}
		}
	}
	code, b = apiGet(t, "GET", base+"/api/traces/"+ids["prod"], "", "")
	if code != 200 || json.Unmarshal(b, &jt) != nil || len(jt.Data) != 1 {
		t.Fatalf("Jaeger trace: %d %s", code, b)
	}
	if len(jt.Data[0].Processes) != 1 {
		t.Errorf("Jaeger: %d processes, want 1: %s", len(jt.Data[0].Processes), b)
	}
	for _, s := range jt.Data[0].Spans {
		proc := jt.Data[0].Processes[s.ProcessID]
		if proc.ServiceName != "shop" {
			t.Errorf("Jaeger process %s: service %q", s.ProcessID, proc.ServiceName)
		}
		tags := map[string]any{}
		for _, tag := range proc.Tags {
			tags[tag.Key] = tag.Value
		}
		for k, v := range want {
			if k == "service.name" {
				if _, ok := tags[k]; ok {
					t.Errorf("Jaeger process tags hold service.name (the process's serviceName)")
				}
				continue
			}
			if g, ok := tags[k]; !ok || g != v && !(k == "k8s.pod.labels" && jsonEqual(g, v)) {
				t.Errorf("Jaeger process tag %s = %#v, want %#v", k, g, v)
			}
		}
		stags := map[string]any{}
		for _, tag := range s.Tags {
			stags[tag.Key] = tag.Value
		}
		if stags["otel.scope.name"] != "shop/cart" || stags["otel.scope.version"] != "0.9.0" || stags["team"] != "payments" {
			t.Errorf("Jaeger span tags %v lack the scope", stags)
		}
	}

	// Searches: prod finds the prod trace, dev the dev trace.
	for _, env := range []string{"prod", "dev"} {
		if got := search("attr=" + url.QueryEscape("deployment.environment="+env)); !slices.Equal(got, []string{ids[env]}) {
			t.Errorf("REST attr=deployment.environment=%s finds %v, want %s", env, got, ids[env])
		}
		out := ok(t, "query", "--url", base, "--attr", "deployment.environment="+env, "--json").stdout
		if !strings.Contains(out, ids[env]) || strings.Contains(out, ids[other(env)]) {
			t.Errorf("query --url --attr deployment.environment=%s:\n%s", env, out)
		}
		var jr struct{ Data []struct{ TraceID string } }
		tags := url.QueryEscape(`{"deployment.environment":"` + env + `"}`)
		code, b := apiGet(t, "GET", base+"/api/traces?service=shop&tags="+tags, "", "")
		if code != 200 || json.Unmarshal(b, &jr) != nil || len(jr.Data) != 1 || jr.Data[0].TraceID != ids[env] {
			t.Errorf("Jaeger tags deployment.environment=%s: %d %.400s", env, code, b)
		}
	}
	if got := search("attr=" + url.QueryEscape("deployment.environment=staging")); len(got) != 0 {
		t.Errorf("deployment.environment=staging finds %v", got)
	}
	if got := search("attr=" + url.QueryEscape("process.pid="+pid) + "&attr=" + url.QueryEscape("otel.scope.version=0.9.0")); len(got) != 2 {
		t.Errorf("process.pid and otel.scope.version find %v, want both traces", got)
	}
	if got := search("eql=" + url.QueryEscape(`deployment.environment = 'dev' and team = 'payments'`)); !slices.Equal(got, []string{ids["dev"]}) {
		t.Errorf("EQL deployment.environment = 'dev' finds %v, want %s", got, ids["dev"])
	}

	// The store, read after the bridge stopped.
	p.Stop()
	st := filepath.Join(dir, "store")
	for _, env := range []string{"prod", "dev"} {
		out := ok(t, "query", "--store", st, "--attr", "deployment.environment="+env, "--json").stdout
		if !strings.Contains(out, ids[env]) || strings.Contains(out, ids[other(env)]) {
			t.Errorf("query --store --attr deployment.environment=%s:\n%s", env, out)
		}
	}
	out := ok(t, "query", "--store", st, "--trace-id", ids["prod"], "--json").stdout
	for _, s := range []string{`"deployment.environment":"prod"`, `"service.version":"2.4.1"`, `"telemetry.sdk.language":"go"`, `"process.pid":` + pid, `"version":"0.9.0"`} {
		if !strings.Contains(out, s) {
			t.Errorf("query --store --trace-id lacks %s:\n%s", s, out)
		}
	}
}

func other(env string) string {
	if env == "prod" {
		return "dev"
	}
	return "prod"
}

// sdkVersion is the version of the OpenTelemetry SDK the test is built
// with, as its resource names it.
func sdkVersion(t *testing.T) string {
	t.Helper()
	r, err := resource.New(context.Background(), resource.WithTelemetrySDK())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := r.Set().Value("telemetry.sdk.version")
	if !ok {
		t.Fatal("the SDK's resource has no telemetry.sdk.version")
	}
	return v.AsString()
}

// jsonEqual reports whether g, a JSON array or its text, is the JSON text
// want.
func jsonEqual(g any, want any) bool {
	if s, ok := g.(string); ok {
		return s == want
	}
	b, _ := json.Marshal(g)
	return string(b) == want
}
