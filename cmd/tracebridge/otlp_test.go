package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

// otlpService is one instrumented service of the tests: a tracer provider
// exporting over gRPC or HTTP to the bridge, and recording what it ended
// in memory alongside.
type otlpService struct {
	tp  *sdktrace.TracerProvider
	tr  oteltrace.Tracer
	rec *tracetest.SpanRecorder
	exp sdktrace.SpanExporter
}

// export sends what the service recorded with its exporter directly (the
// SDK's processors hand export errors to a global handler instead).
func (s *otlpService) export(ctx context.Context) error { return s.exp.ExportSpans(ctx, s.rec.Ended()) }

func newOTLPService(t *testing.T, name, grpcAddr, httpAddr, token string, manual bool) *otlpService {
	t.Helper()
	ctx := context.Background()
	var exp sdktrace.SpanExporter
	var err error
	headers := map[string]string{}
	if token != "" {
		headers["Authorization"] = "Bearer " + token
	}
	if grpcAddr != "" {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithHeaders(headers))
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithInsecure(), otlptracehttp.WithHeaders(headers),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	}
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(name), semconv.HostName(name+"-host"))
	rec := tracetest.NewSpanRecorder()
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec)}
	if !manual {
		opts = append(opts, sdktrace.WithSyncer(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	t.Cleanup(func() { tp.Shutdown(context.Background()); exp.Shutdown(context.Background()) })
	return &otlpService{tp: tp, tr: tp.Tracer("tracebridge-test"), rec: rec, exp: exp}
}

// shopRequest is one request across three services: a frontend calls
// checkout (over gRPC) and checkout calls the inventory (over HTTP),
// propagating the context as a real RPC would.
func shopRequest(front, checkout, inventory *otlpService, i int) {
	ctx, root := front.tr.Start(context.Background(), "GET /cart", oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithAttributes(attribute.Int("request", i)))
	cctx, call := front.tr.Start(ctx, "checkout.Pay", oteltrace.WithSpanKind(oteltrace.SpanKindClient))
	// The callee sees only the propagated span context.
	remote := oteltrace.ContextWithRemoteSpanContext(context.Background(), oteltrace.SpanContextFromContext(cctx))
	sctx, srv := checkout.tr.Start(remote, "Pay", oteltrace.WithSpanKind(oteltrace.SpanKindServer))
	for j := range 1 + i%3 {
		ictx, get := checkout.tr.Start(sctx, fmt.Sprintf("inventory.Reserve#%d", j), oteltrace.WithSpanKind(oteltrace.SpanKindClient))
		iremote := oteltrace.ContextWithRemoteSpanContext(context.Background(), oteltrace.SpanContextFromContext(ictx))
		_, res := inventory.tr.Start(iremote, "Reserve", oteltrace.WithSpanKind(oteltrace.SpanKindServer))
		time.Sleep(50 * time.Microsecond)
		if i%4 == 3 && j == 0 {
			res.SetStatus(codes.Error, "out of stock")
		}
		res.End()
		get.End()
	}
	srv.End()
	call.End()
	root.End()
}

// sdkTrees returns, per trace id (hex), the spans the SDKs ended, as
// "parent name > name @start-end service" lines, sorted.
func sdkTrees(services ...*otlpService) map[string][]string {
	byID := map[string]map[string]sdktrace.ReadOnlySpan{}
	for _, s := range services {
		for _, sp := range s.rec.Ended() {
			id := sp.SpanContext().TraceID().String()
			if byID[id] == nil {
				byID[id] = map[string]sdktrace.ReadOnlySpan{}
			}
			byID[id][sp.SpanContext().SpanID().String()] = sp
		}
	}
	out := map[string][]string{}
	for id, spans := range byID {
		for _, sp := range spans {
			parent := "-"
			if p, ok := spans[sp.Parent().SpanID().String()]; ok {
				parent = p.Name()
			}
			svc, _ := sp.Resource().Set().Value(semconv.ServiceNameKey)
			out[id] = append(out[id], fmt.Sprintf("%s > %s @%d-%d %s", parent, sp.Name(), sp.StartTime().UnixNano(), sp.EndTime().UnixNano(), svc.AsString()))
		}
		slices.Sort(out[id])
	}
	return out
}

// jsonTrees reads `traces --json` or `query --json --trace-id` output the
// same way, by trace id: the store's, or a Kieker log's traceId (the low 64
// bits) in hex.
func jsonTrees(t *testing.T, out string, fromLog bool) map[string][]string {
	t.Helper()
	trees := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var tr struct {
			TraceID string `json:"traceId"`
			Spans   []struct {
				SpanID     string         `json:"spanId"`
				Parent     *string        `json:"parentSpanId"`
				Operation  string         `json:"operation"`
				Host       string         `json:"host"`
				Service    string         `json:"service"`
				Start      int64          `json:"start"`
				End        int64          `json:"end"`
				Attributes map[string]any `json:"attributes"`
			} `json:"spans"`
		}
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if tr.TraceID == "" {
			continue
		}
		names := map[string]string{}
		for _, s := range tr.Spans {
			names[s.SpanID] = s.Operation
		}
		key := tr.TraceID
		for _, s := range tr.Spans {
			parent := "-"
			if s.Parent != nil {
				parent = names[*s.Parent]
			}
			svc := s.Service
			if fromLog {
				svc = s.Host // an OperationExecutionRecord's hostname is the service
				id, err := strconv.ParseInt(tr.TraceID, 10, 64)
				if err != nil {
					t.Fatalf("Kieker trace id %q: %v", tr.TraceID, err)
				}
				key = fmt.Sprintf("%016x", uint64(id))
			}
			trees[key] = append(trees[key], fmt.Sprintf("%s > %s @%d-%d %s", parent, s.Operation, s.Start, s.End, svc))
		}
		slices.Sort(trees[key])
	}
	return trees
}

// TestOTLPFromTheSDK: three services instrumented with the OpenTelemetry
// Go SDK export over OTLP/gRPC and OTLP/HTTP to a running bridge; every
// trace, assembled across the services, is in the Kieker log (as
// OperationExecutionRecords: `traces` reads the same trees back) and in
// the trace store (with the SDK's ids).
func TestOTLPFromTheSDK(t *testing.T) {
	p := bridgetest.StartConfig(t, `flush_interval: 100ms
traces: {window: 300ms}
receivers:
  - {name: grpc, type: otlp-grpc, listen: "127.0.0.1:0"}
  - {name: http, type: otlp-http, listen: "127.0.0.1:0"}
sinks:
  - {type: kieker-log, path: logs}
  - {type: store, path: store}
`, "--metrics", "127.0.0.1:0")
	front := newOTLPService(t, "frontend", p.Addr("grpc"), "", "", false)
	checkout := newOTLPService(t, "checkout", p.Addr("grpc"), "", "", false)
	inventory := newOTLPService(t, "inventory", "", p.Addr("http"), "", false)
	const requests = 12
	for i := range requests {
		shopRequest(front, checkout, inventory, i)
	}
	want := sdkTrees(front, checkout, inventory)
	if len(want) != requests {
		t.Fatalf("the SDK recorded %d traces", len(want))
	}
	time.Sleep(time.Second) // the traces' window
	resp, err := http.Get("http://" + p.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf("tracebridge_traces_assembled_total %d\n", requests),
		fmt.Sprintf(`tracebridge_sink_traces_total{sink="kieker-log"} %d`+"\n", requests),
		fmt.Sprintf(`tracebridge_sink_traces_total{sink="store"} %d`+"\n", requests),
		"tracebridge_traces_open 0\n", "tracebridge_traces_broken_total 0\n",
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	p.Stop()

	fromLog := jsonTrees(t, ok(t, "traces", "--json", filepath.Join(p.Dir, "logs")).stdout, true)
	wantLow := map[string][]string{} // a Kieker traceId holds the low 64 bits
	for id, spans := range want {
		wantLow[id[16:]] = spans
	}
	if d := cmp.Diff(wantLow, fromLog); d != "" {
		t.Errorf("traces in the Kieker log (-sdk +log):\n%s", d)
	}
	for id, spans := range want {
		got := jsonTrees(t, ok(t, "query", "--store", filepath.Join(p.Dir, "store"), "--trace-id", id, "--json").stdout, false)
		if d := cmp.Diff(map[string][]string{id: spans}, got); d != "" {
			t.Errorf("trace %s in the store (-sdk +store):\n%s", id, d)
		}
	}
	hosts := ok(t, "query", "--store", filepath.Join(p.Dir, "store"), "--host", "frontend-host", "--errors", "--json")
	if n := strings.Count(hosts.stdout, `"traceId"`); n != requests/4 {
		t.Errorf("%d traces with errors found by the frontend's host, want %d:\n%s", n, requests/4, hosts.stdout)
	}
}

// TestOTLPBearerTokens: with security on, an OTLP request needs the
// bearer token of a host of the host table; its spans become
// that host's. Without a token, or with a wrong one, the SDK's export
// fails (401, UNAUTHENTICATED) and nothing is kept.
func TestOTLPBearerTokens(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	os.WriteFile(secret, []byte("tok-123\n"), 0o600)
	ok(t, "hosts", "--data-dir", filepath.Join(dir, "tracebridge-data"), "add", "shop-1", "--secret-file", secret)
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `flush_interval: 100ms
traces: {window: 300ms}
receivers:
  - {name: grpc, type: otlp-grpc, listen: "127.0.0.1:0", security: true}
  - {name: http, type: otlp-http, listen: "127.0.0.1:0", security: true}
sinks:
  - {type: store, path: store}
`))
	ctx := context.Background()
	for _, c := range []struct{ grpc, http, token string }{
		{p.Addr("grpc"), "", ""}, {p.Addr("grpc"), "", "wrong"}, {"", p.Addr("http"), ""}, {"", p.Addr("http"), "wrong"},
	} {
		s := newOTLPService(t, "intruder", c.grpc, c.http, c.token, true)
		_, sp := s.tr.Start(ctx, "sneak")
		sp.End()
		if err := s.export(ctx); err == nil || !strings.Contains(strings.ToLower(err.Error()), "unauth") {
			t.Errorf("grpc %q http %q token %q: export %v, want unauthenticated", c.grpc, c.http, c.token, err)
		}
	}
	for _, s := range []*otlpService{newOTLPService(t, "web", p.Addr("grpc"), "", "tok-123", true), newOTLPService(t, "api", "", p.Addr("http"), "tok-123", true)} {
		_, sp := s.tr.Start(ctx, "served")
		sp.End()
		if err := s.export(ctx); err != nil {
			t.Fatalf("export with the host's token: %v", err)
		}
	}
	time.Sleep(time.Second)
	p.Stop()
	got, _ := queryJSON(t, dir)
	var names []string
	for _, tr := range got {
		names = append(names, fmt.Sprint(tr["host"], " ", tr["name"]))
	}
	slices.Sort(names)
	if d := cmp.Diff([]string{"shop-1 served", "shop-1 served"}, names); d != "" {
		t.Errorf("stored traces (-want +got):\n%s", d)
	}
	if !strings.Contains(p.Stderr(), "OTLP request refused") {
		t.Errorf("no refusal logged:\n%s", p.Stderr())
	}
}
