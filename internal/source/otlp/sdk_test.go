package otlp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// sink collects copies of the records and the origins of their batches.
type sink struct {
	mu      sync.Mutex
	records []record.Record
	origins []record.Origin
}

var _ pipeline.Sink = (*sink)(nil)

func (s *sink) Consume(_ context.Context, b *record.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.Records {
		s.records = append(s.records, b.Records[i].Clone())
	}
	s.origins = append(s.origins, b.Origin)
	return nil
}

func (s *sink) Flush() error { return nil }
func (s *sink) Close() error { return nil }

func (s *sink) snapshot() ([]record.Record, []record.Origin) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record.Record(nil), s.records...), append([]record.Origin(nil), s.origins...)
}

func (s *sink) waitFor(t *testing.T, n int) []record.Record {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		recs, _ := s.snapshot()
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records within 20s, want %d", len(recs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startReceiver builds a receiver of type typ on a free port through its
// factory and runs it in a bridge with a collecting sink.
func startReceiver(t *testing.T, typ string, edit func(*Config)) (pipeline.Receiver, *sink, func() error) {
	t.Helper()
	var f pipeline.ReceiverFactory
	for _, rf := range Factories() {
		if rf.Type() == typ {
			f = rf
		}
	}
	cfg := f.NewConfig().(*Config)
	cfg.Listen = "127.0.0.1:0"
	if edit != nil {
		edit(cfg)
	}
	r, err := f.NewReceiver(cfg, pipeline.Settings{Name: "otlp"})
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	stop := servicetest.RunBridge(t, r, s)
	return r, s, stop
}

func addrOf(r pipeline.Receiver) string {
	switch x := r.(type) {
	case *GRPC:
		return x.Addr().String()
	case *HTTP:
		return x.Addr().String()
	}
	return ""
}

// service is one instrumented service: a tracer provider exporting to the
// receiver and, as the reference, to memory.
type service struct {
	tp  *sdktrace.TracerProvider
	mem *tracetest.InMemoryExporter
	tr  oteltrace.Tracer
}

func newService(t *testing.T, exp sdktrace.SpanExporter, attrs ...attribute.KeyValue) *service {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(20*time.Millisecond), sdktrace.WithMaxExportBatchSize(13)),
		sdktrace.WithSyncer(mem),
	)
	return &service{tp: tp, mem: mem, tr: tp.Tracer("shop/" + attrs[0].Value.AsString())}
}

// workload makes traces that cross three services and several
// goroutines, with every kind of attribute, events, links and statuses.
func workload(front, cart, pay *service, traces int) {
	var wg sync.WaitGroup
	for i := range traces {
		wg.Go(func() {
			ctx, root := front.tr.Start(context.Background(), "GET /checkout",
				oteltrace.WithSpanKind(oteltrace.SpanKindServer),
				oteltrace.WithAttributes(
					attribute.String("http.method", "GET"),
					attribute.Int("http.status_code", 200),
					attribute.Bool("retry", i%2 == 0),
					attribute.Float64("load", float64(i)/3),
					attribute.StringSlice("tags", []string{"a", "b<c>"}),
					attribute.Int64Slice("ids", []int64{1, -2}),
					attribute.Float64Slice("ratios", []float64{0.5, 1e-7}),
					attribute.BoolSlice("flags", []bool{true, false}),
					attribute.ByteSlice("raw", []byte{0, 1, 255}),
					attribute.Map("user", attribute.String("name", "ann"), attribute.Int("age", 40)),
					attribute.Slice("mixed", attribute.StringValue("x"), attribute.IntValue(1)),
					attribute.Int("thread.id", 100+i),
				))
			var inner sync.WaitGroup
			for j := range 2 {
				inner.Go(func() {
					cctx, c := cart.tr.Start(ctx, fmt.Sprintf("cart.add#%d", j),
						oteltrace.WithSpanKind(oteltrace.SpanKindClient),
						oteltrace.WithAttributes(attribute.String("code.namespace", "org.shop.Cart"), attribute.String("thread.name", "pool-1")))
					_, p := pay.tr.Start(cctx, "pay",
						oteltrace.WithSpanKind(oteltrace.SpanKindServer),
						oteltrace.WithLinks(oteltrace.Link{SpanContext: root.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "follows")}}))
					p.AddEvent("charged", oteltrace.WithAttributes(attribute.Int("cents", 1299), attribute.String("cur", "EUR")))
					if j == 1 {
						p.RecordError(errors.New("card declined"))
						p.SetStatus(codes.Error, "declined")
					}
					p.End()
					c.End()
				})
			}
			inner.Wait()
			root.AddEvent("done")
			root.SetStatus(codes.Ok, "")
			root.End()
		})
	}
	wg.Wait()
}

// wantValue is an attribute value as text and type, computed from the
// SDK's value with encoding/json (independently of the decoder).
func wantValue(v attribute.Value) (string, trace.ValueType) {
	switch v.Type() {
	case attribute.STRING:
		return v.AsString(), trace.TypeString
	case attribute.BOOL:
		return strconv.FormatBool(v.AsBool()), trace.TypeBool
	case attribute.INT64:
		return strconv.FormatInt(v.AsInt64(), 10), trace.TypeInt
	case attribute.FLOAT64:
		return marshal(v.AsFloat64()), trace.TypeDouble
	case attribute.BYTESLICE:
		return base64.StdEncoding.EncodeToString(v.AsByteSlice()), trace.TypeBytes
	case attribute.EMPTY:
		return "", trace.TypeString
	}
	return marshal(raw(v)), trace.TypeJSON
}

// raw is v as encoding/json should write it.
func raw(v attribute.Value) any {
	switch v.Type() {
	case attribute.STRING:
		return v.AsString()
	case attribute.BOOL:
		return v.AsBool()
	case attribute.INT64:
		return v.AsInt64()
	case attribute.FLOAT64:
		return v.AsFloat64()
	case attribute.BYTESLICE:
		return v.AsByteSlice()
	case attribute.BOOLSLICE:
		return v.AsBoolSlice()
	case attribute.INT64SLICE:
		return v.AsInt64Slice()
	case attribute.FLOAT64SLICE:
		return v.AsFloat64Slice()
	case attribute.STRINGSLICE:
		return v.AsStringSlice()
	case attribute.SLICE:
		var out []any
		for _, e := range v.AsSlice() {
			out = append(out, raw(e))
		}
		return out
	case attribute.MAP:
		return rawMap(v.AsMap())
	}
	return nil
}

func rawMap(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = raw(kv.Value)
	}
	return m
}

func marshal(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// wantSpan is the record the receiver must deliver for a span the SDK
// exported, one line per field.
func wantSpan(s tracetest.SpanStub) []string {
	var service, host, process string
	var res []string
	for _, kv := range s.Resource.Attributes() {
		v, typ := wantValue(kv.Value)
		switch kv.Key {
		case "service.name":
			service = v
		case "host.name":
			host = v
		case "process.pid":
			process = v
		}
		res = append(res, fmt.Sprintf("%s=%s/%d", kv.Key, v, typ))
	}
	// The scope's version and attributes follow the resource's, behind
	// trace.ScopeMark.
	if sc := s.InstrumentationScope; sc.Version != "" || sc.Attributes.Len() > 0 {
		res = append(res, fmt.Sprintf("%s=%s/%d", trace.ScopeVersionKey, sc.Version, trace.ScopeMark))
		for _, kv := range sc.Attributes.ToSlice() {
			v, typ := wantValue(kv.Value)
			res = append(res, fmt.Sprintf("%s=%s/%d", kv.Key, v, typ))
		}
	}
	if host == "" {
		host = service
	}
	var attrs []string
	thread, threadName, component := "", "", ""
	for _, kv := range s.Attributes {
		v, typ := wantValue(kv.Value)
		attrs = append(attrs, fmt.Sprintf("%s=%s/%d", kv.Key, v, typ))
		switch kv.Key {
		case "thread.id":
			thread = v
		case "thread.name":
			threadName = v
		case "code.namespace":
			component = v
		}
	}
	if thread == "" {
		thread = threadName
	}
	var events []string
	for _, e := range s.Events {
		events = append(events, fmt.Sprintf("%s@%d%s", e.Name, e.Time.UnixNano(), marshal(rawMap(e.Attributes))))
	}
	var links []string
	for _, l := range s.Links {
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		links = append(links, fmt.Sprintf("%s/%s/%s%s", hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:]),
			l.SpanContext.TraceState().String(), marshal(rawMap(l.Attributes))))
	}
	status := 0
	switch s.Status.Code {
	case codes.Ok:
		status = 1
	case codes.Error:
		status = 2
	}
	flags := uint32(s.SpanContext.TraceFlags()) | 0x100
	if s.Parent.IsRemote() {
		flags |= 0x200
	}
	tid, sid, pid := s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.Parent.SpanID()
	return []string{
		"trace=" + hex.EncodeToString(tid[:]),
		"span=" + hex.EncodeToString(sid[:]),
		"parent=" + hex.EncodeToString(pid[:]),
		"name=" + s.Name,
		"service=" + service, "host=" + host, "process=" + process,
		fmt.Sprintf("start=%d end=%d", s.StartTime.UnixNano(), s.EndTime.UnixNano()),
		fmt.Sprintf("kind=%d status=%d message=%s", s.SpanKind, status, s.Status.Description),
		"scope=" + s.InstrumentationScope.Name,
		"component=" + component, "thread=" + thread,
		"attributes=" + strings.Join(attrs, " | "),
		"resource=" + strings.Join(res, " | "),
		"events=" + strings.Join(events, " | "),
		"links=" + strings.Join(links, " | "),
		"traceState=" + s.SpanContext.TraceState().String(),
		fmt.Sprintf("flags=%d", flags),
	}
}

// gotSpan renders a span record the same way.
func gotSpan(r *record.Record) []string {
	v := r.Values
	id := func(words ...int) string {
		var b []byte
		for _, w := range words {
			b = fmt.Appendf(b, "%016x", uint64(v[w].Int()))
		}
		return string(b)
	}
	pairs := func(kv, types record.Value) string {
		var out []string
		items, ts := kv.List().Items, types.List().Items
		for i := 0; i+1 < len(items); i += 2 {
			out = append(out, fmt.Sprintf("%s=%s/%d", items[i].Str(), items[i+1].Str(), ts[i/2].Int()))
		}
		return strings.Join(out, " | ")
	}
	var events, links []string
	ev := v[trace.SpanEvents].List().Items
	for i := 0; i+2 < len(ev); i += 3 {
		events = append(events, ev[i].Str()+"@"+ev[i+1].Str()+ev[i+2].Str())
	}
	ln := v[trace.SpanLinks].List().Items
	for i := 0; i+3 < len(ln); i += 4 {
		links = append(links, ln[i].Str()+"/"+ln[i+1].Str()+"/"+ln[i+2].Str()+ln[i+3].Str())
	}
	return []string{
		"trace=" + id(trace.SpanTraceIDHigh, trace.SpanTraceIDLow),
		"span=" + id(trace.SpanSpanID),
		"parent=" + id(trace.SpanParentID),
		"name=" + v[trace.SpanName].Str(),
		"service=" + v[trace.SpanService].Str(), "host=" + v[trace.SpanHost].Str(), "process=" + v[trace.SpanProcess].Str(),
		fmt.Sprintf("start=%d end=%d", v[trace.SpanStart].Int(), v[trace.SpanEnd].Int()),
		fmt.Sprintf("kind=%d status=%d message=%s", v[trace.SpanKind].Int(), v[trace.SpanStatus].Int(), v[trace.SpanStatusMessage].Str()),
		"scope=" + v[trace.SpanScope].Str(),
		"component=" + v[trace.SpanComponent].Str(), "thread=" + v[trace.SpanThread].Str(),
		"attributes=" + pairs(v[trace.SpanAttributes], v[trace.SpanAttributeTypes]),
		"resource=" + pairs(v[trace.SpanResource], v[trace.SpanResourceTypes]),
		"events=" + strings.Join(events, " | "),
		"links=" + strings.Join(links, " | "),
		"traceState=" + v[trace.SpanTraceState].Str(),
		fmt.Sprintf("flags=%d", v[trace.SpanFlags].Int()),
	}
}

// TestSDK: the OpenTelemetry Go SDK's exporters send nested spans of
// three services from many goroutines; every span arrives as the SDK
// exported it (the in-memory exporter beside is the reference).
func TestSDK(t *testing.T) {
	tests := []struct {
		typ      string
		exporter func(ctx context.Context, addr string, gzip bool) (sdktrace.SpanExporter, error)
	}{
		{TypeGRPC, func(ctx context.Context, addr string, gzip bool) (sdktrace.SpanExporter, error) {
			opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure()}
			if gzip {
				opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
			}
			return otlptracegrpc.New(ctx, opts...)
		}},
		{TypeHTTP, func(ctx context.Context, addr string, gzip bool) (sdktrace.SpanExporter, error) {
			opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure()}
			if gzip {
				opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
			}
			return otlptracehttp.New(ctx, opts...)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			r, s, stop := startReceiver(t, tt.typ, nil)
			addr := addrOf(r)
			ctx := context.Background()
			exp := func(gzip bool) sdktrace.SpanExporter {
				e, err := tt.exporter(ctx, addr, gzip)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			front := newService(t, exp(false), attribute.String("service.name", "frontend"), attribute.String("host.name", "web-1"),
				attribute.Int("process.pid", 4711), attribute.String("deployment.environment", "test"))
			cart := newService(t, exp(true), attribute.String("service.name", "cart"), attribute.String("host.name", "cart-1"))
			pay := newService(t, exp(false), attribute.String("service.name", "payment"))
			workload(front, cart, pay, 25)
			var stubs tracetest.SpanStubs
			for _, svc := range []*service{front, cart, pay} {
				stubs = append(stubs, svc.mem.GetSpans()...) // Shutdown empties it
				if err := svc.tp.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if len(stubs) != 25*5 {
				t.Fatalf("the SDK recorded %d spans, want %d", len(stubs), 25*5)
			}
			recs := s.waitFor(t, len(stubs))
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for i := range recs {
				g := gotSpan(&recs[i])
				if _, dup := got[g[1]]; dup {
					t.Errorf("span %s delivered twice", g[1])
				}
				got[g[1]] = g
			}
			if len(got) != len(stubs) {
				t.Errorf("%d distinct spans delivered, the SDK exported %d", len(got), len(stubs))
			}
			for _, st := range stubs {
				w := wantSpan(st)
				if d := cmp.Diff(w, got[w[1]]); d != "" {
					t.Errorf("span %s (-exported +delivered):\n%s", w[1], d)
				}
			}
			_, origins := s.snapshot()
			for _, o := range origins {
				if o.Receiver != "otlp" || !strings.HasPrefix(o.Peer, "127.0.0.1:") {
					t.Errorf("origin %+v: want receiver otlp and the peer's address", o)
				}
				if o.Host != "" && o.Service == "" {
					t.Errorf("origin %+v names a host without its service", o)
				}
			}
		})
	}
}
