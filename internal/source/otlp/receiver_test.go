package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/tlstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// traces returns an export of n spans of one service, ids from seed.
func traces(n int, seed byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty()
	for i := range n {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(pcommon.TraceID{0: seed, 1: 1})
		s.SetSpanID(pcommon.SpanID{0: seed, 6: byte(i >> 8), 7: byte(i) + 1})
		s.SetName("op")
	}
	return td
}

func protoBody(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonBody(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

type post struct {
	body        []byte
	contentType string
	encoding    string
	method      string
}

func (p post) do(t *testing.T, addr string) (*http.Response, []byte) {
	t.Helper()
	method := p.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, "http://"+addr+TracesPath, bytes.NewReader(p.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", p.contentType)
	if p.encoding != "" {
		req.Header.Set("Content-Encoding", p.encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// rpcStatus reads a google.rpc.Status body (protobuf or JSON) loosely: its
// message.
func rpcMessage(body []byte) string { return string(body) }

func TestHTTPInput(t *testing.T) {
	r, s, _ := startReceiver(t, TypeHTTP, nil)
	addr := addrOf(r)
	good := protoBody(t, traces(3, 1))
	bad := traces(3, 2)
	bad.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).SetSpanID(pcommon.SpanID{})
	bomb := gzipped(make([]byte, 64<<20)) // 64 MiB of zeros, max is 16 MiB
	tests := []struct {
		name    string
		post    post
		status  int
		reason  string // in the body
		records int    // delivered by this request
	}{
		{"protobuf", post{body: good, contentType: "application/x-protobuf"}, 200, "", 3},
		{"json", post{body: jsonBody(t, traces(2, 3)), contentType: "application/json; charset=utf-8"}, 200, "{}", 2},
		{"gzip", post{body: gzipped(protoBody(t, traces(4, 4))), contentType: "application/x-protobuf", encoding: "gzip"}, 200, "", 4},
		{"partial success", post{body: protoBody(t, bad), contentType: "application/x-protobuf"}, 200, "span id is missing or all zero", 2},
		{"partial success json", post{body: jsonBody(t, bad), contentType: "application/json"}, 200, `"rejectedSpans":"1"`, 2},
		{"wrong content type", post{body: good, contentType: "text/plain"}, 415, "content type", 0},
		{"no content type", post{body: good}, 415, "content type", 0},
		{"wrong encoding", post{body: good, contentType: "application/x-protobuf", encoding: "br"}, 415, "content encoding", 0},
		{"malformed protobuf", post{body: good[:len(good)-3], contentType: "application/x-protobuf"}, 400, "offset", 0},
		{"malformed json", post{body: []byte(`{"resourceSpans": [}`), contentType: "application/json"}, 400, `"message":"otlp: offset 19`, 0},
		{"corrupt gzip", post{body: []byte("not gzip"), contentType: "application/x-protobuf", encoding: "gzip"}, 400, "gzip", 0},
		{"gzip bomb", post{body: bomb, contentType: "application/x-protobuf", encoding: "gzip"}, 413, "max_message_size", 0},
		{"oversize", post{body: make([]byte, 16<<20+1), contentType: "application/x-protobuf"}, 413, "max_message_size", 0},
		{"GET", post{method: http.MethodGet, contentType: "application/x-protobuf"}, 405, "POST", 0},
	}
	total := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			resp, body := tt.post.do(t, addr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.status)
			}
			if !strings.Contains(rpcMessage(body), tt.reason) {
				t.Errorf("body %q, want it to say %q", body, tt.reason)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			total += tt.records
			s.waitFor(t, total)
		})
	}
	// The partial success in protobuf, read by pdata.
	resp, body := post{body: protoBody(t, bad), contentType: "application/x-protobuf"}.do(t, addr)
	er := ptraceotlp.NewExportResponse()
	if err := er.UnmarshalProto(body); err != nil || resp.Header.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("response %q (%s): %v", body, resp.Header.Get("Content-Type"), err)
	}
	if ps := er.PartialSuccess(); ps.RejectedSpans() != 1 || !strings.Contains(ps.ErrorMessage(), "span id") {
		t.Errorf("partial success %d %q", ps.RejectedSpans(), ps.ErrorMessage())
	}
	// And in JSON.
	_, body = post{body: jsonBody(t, bad), contentType: "application/json"}.do(t, addr)
	if err := er.UnmarshalJSON(body); err != nil || er.PartialSuccess().RejectedSpans() != 1 {
		t.Errorf("JSON response %s: %v", body, err)
	}
}

// blocking is a consumer that takes batches only when released.
type blocking struct {
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *blocking) Consume(ctx context.Context, batch *record.Batch) error {
	_, err := b.Emit(ctx, batch)
	return err
}

func (b *blocking) Emit(ctx context.Context, batch *record.Batch) (*record.Batch, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
		return batch, ctx.Err()
	}
	b.mu.Lock()
	b.n += batch.Len()
	b.mu.Unlock()
	return new(record.Batch), nil
}

func (b *blocking) records() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// run runs r with consumer out until the test ends.
func run(t *testing.T, r pipeline.Receiver, out pipeline.Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, out) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestHTTPBackPressure(t *testing.T) {
	r, err := NewHTTP(Config{Listen: "127.0.0.1:0", EmitTimeout: pipeline.Duration(200 * time.Millisecond)}, pipeline.Settings{Name: "otlp"})
	if err != nil {
		t.Fatal(err)
	}
	out := &blocking{release: make(chan struct{})}
	run(t, r, out)
	start := time.Now()
	resp, body := post{body: protoBody(t, traces(5, 1)), contentType: "application/x-protobuf"}.do(t, r.Addr().String())
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("answered after %v", took)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q (%s); want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	close(out.release)
	resp, _ = post{body: protoBody(t, traces(5, 1)), contentType: "application/x-protobuf"}.do(t, r.Addr().String())
	if resp.StatusCode != 200 || out.records() != 5 {
		t.Errorf("after release: status %d, %d records", resp.StatusCode, out.records())
	}
}

// rawClientCodec sends and receives bytes as they are.
type rawClientCodec struct{}

func (rawClientCodec) Name() string { return "proto" }
func (rawClientCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawClientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func dialRaw(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawClientCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

func export(conn *grpc.ClientConn, msg []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp []byte
	err := conn.Invoke(ctx, exportMethod, &msg, &resp)
	return resp, err
}

func TestGRPCInput(t *testing.T) {
	r, s, _ := startReceiver(t, TypeGRPC, func(c *Config) { c.MaxMessageSize = 1 << 20 })
	conn := dialRaw(t, addrOf(r), nil)
	bad := traces(3, 2)
	bad.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).SetTraceID(pcommon.TraceID{})

	resp, err := export(conn, protoBody(t, traces(3, 1)))
	if err != nil || len(resp) != 0 {
		t.Fatalf("export: %q, %v; want an empty response", resp, err)
	}
	resp, err = export(conn, protoBody(t, bad))
	if err != nil {
		t.Fatal(err)
	}
	er := ptraceotlp.NewExportResponse()
	if err := er.UnmarshalProto(resp); err != nil {
		t.Fatal(err)
	}
	if ps := er.PartialSuccess(); ps.RejectedSpans() != 1 || !strings.Contains(ps.ErrorMessage(), "trace id is missing") {
		t.Errorf("partial success %d %q", ps.RejectedSpans(), ps.ErrorMessage())
	}
	s.waitFor(t, 5)

	msg := protoBody(t, traces(3, 1))
	_, err = export(conn, msg[:len(msg)-2])
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "offset") {
		t.Errorf("malformed: %v; want INVALID_ARGUMENT naming the offset", err)
	}
	_, err = export(conn, make([]byte, 1<<20+1))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Errorf("oversize: %v; want RESOURCE_EXHAUSTED", err)
	}
	if recs, _ := s.snapshot(); len(recs) != 5 {
		t.Errorf("%d records, want 5", len(recs))
	}
}

func TestGRPCBackPressure(t *testing.T) {
	r, err := NewGRPC(Config{Listen: "127.0.0.1:0", EmitTimeout: pipeline.Duration(200 * time.Millisecond)}, pipeline.Settings{Name: "otlp"})
	if err != nil {
		t.Fatal(err)
	}
	out := &blocking{release: make(chan struct{})}
	run(t, r, out)
	conn := dialRaw(t, r.Addr().String(), nil)
	start := time.Now()
	_, err = export(conn, protoBody(t, traces(5, 1)))
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("answered after %v", took)
	}
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%v; want RESOURCE_EXHAUSTED", err)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() <= 0 {
		t.Errorf("details %v: want RetryInfo with a delay", st.Details())
	}
	close(out.release)
	if _, err := export(conn, protoBody(t, traces(5, 1))); err != nil || out.records() != 5 {
		t.Errorf("after release: %v, %d records", err, out.records())
	}
}

// slow is a consumer that takes a while per batch; entered, if not nil,
// hears of every batch as it begins.
type slow struct {
	delay   time.Duration
	entered chan struct{}
	mu      sync.Mutex
	n       int
}

func (s *slow) Consume(ctx context.Context, b *record.Batch) error {
	if s.entered != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	s.n += b.Len()
	s.mu.Unlock()
	return nil
}

func (s *slow) records() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// TestShutdown: a request in flight when Run's context ends is answered
// and its spans delivered; then the port is closed. Close is safe twice,
// with or without Run.
func TestShutdown(t *testing.T) {
	for _, typ := range []string{TypeGRPC, TypeHTTP} {
		t.Run(typ, func(t *testing.T) {
			cfg := Config{Listen: "127.0.0.1:0", EmitTimeout: pipeline.Duration(5 * time.Second)}
			var r pipeline.Receiver
			var err error
			if typ == TypeGRPC {
				r, err = NewGRPC(cfg, pipeline.Settings{})
			} else {
				r, err = NewHTTP(cfg, pipeline.Settings{})
			}
			if err != nil {
				t.Fatal(err)
			}
			addr := addrOf(r)
			out := &slow{delay: 300 * time.Millisecond, entered: make(chan struct{}, 1)}
			stop := run(t, r, out)
			var conn *grpc.ClientConn
			if typ == TypeGRPC {
				conn = dialRaw(t, addr, nil)
			}
			answered := make(chan error, 1)
			go func() {
				if conn != nil {
					_, err := export(conn, protoBody(t, traces(4, 1)))
					answered <- err
					return
				}
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+TracesPath, bytes.NewReader(protoBody(t, traces(4, 1))))
				req.Header.Set("Content-Type", typeProto)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				answered <- err
			}()
			select { // the request is in the consumer
			case <-out.entered:
			case err := <-answered:
				t.Fatalf("answered before it reached the consumer: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the request did not reach the consumer within 30 s")
			}
			stop()
			if err := <-answered; err != nil {
				t.Errorf("request in flight at shutdown: %v", err)
			}
			if out.records() != 4 {
				t.Errorf("%d records delivered, want 4", out.records())
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Error("the port still takes connections after Run returned")
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	// Close without Run releases the port, twice.
	for _, f := range Factories() {
		cfg := f.NewConfig().(*Config)
		cfg.Listen = "127.0.0.1:0"
		r, err := f.NewReceiver(cfg, pipeline.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		addr := addrOf(r)
		r.Close()
		r.Close()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s: port not released: %v", f.Type(), err)
			continue
		}
		ln.Close()
	}
}

func TestTLS(t *testing.T) {
	cert := tlstest.New(t)
	certFile, keyFile := cert.WriteFiles(t, t.TempDir())
	pool := cert.Pool
	withTLS := func(c *Config) { c.TLS = TLS{Cert: certFile, Key: keyFile} }
	tc := &tls.Config{RootCAs: pool}

	g, gs, _ := startReceiver(t, TypeGRPC, withTLS)
	if !strings.HasSuffix(g.Where(), "(TLS)") {
		t.Errorf("Where %q", g.Where())
	}
	if _, err := export(dialRaw(t, addrOf(g), credentials.NewTLS(tc)), protoBody(t, traces(2, 1))); err != nil {
		t.Fatal(err)
	}
	gs.waitFor(t, 2)

	h, hs, _ := startReceiver(t, TypeHTTP, withTLS)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("https://"+addrOf(h)+TracesPath, typeProto, bytes.NewReader(protoBody(t, traces(3, 1))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	hs.waitFor(t, 3)
}

func TestConfig(t *testing.T) {
	for _, f := range Factories() {
		cfg := f.NewConfig().(*Config)
		want := DefaultGRPCListen
		if f.Type() == TypeHTTP {
			want = DefaultHTTPListen
		}
		if cfg.Listen != want {
			t.Errorf("%s: default listen %q, want %q", f.Type(), cfg.Listen, want)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: defaults invalid: %v", f.Type(), err)
		}
		bad := *cfg
		bad.TLS.Cert = "x.pem"
		if err := bad.Validate(); err == nil {
			t.Errorf("%s: a certificate without key is valid", f.Type())
		}
		bad = *cfg
		bad.TLS = TLS{Cert: "/nonexistent/c.pem", Key: "/nonexistent/k.pem"}
		bad.Listen = "127.0.0.1:0"
		if _, err := f.NewReceiver(&bad, pipeline.Settings{}); !errors.Is(err, pipeline.ErrConfig) {
			t.Errorf("%s: missing certificate: %v, want a configuration error", f.Type(), err)
		}
	}
}

// TestInflightBudgetHTTP: the bytes of the bodies being read, over all
// requests, never exceed max_inflight_bytes; a request beyond it is
// answered 429 with Retry-After (gzip bombs included), and once the
// requests in flight are done a normal client gets through again.
func TestInflightBudgetHTTP(t *testing.T) {
	const budget = 4 << 20
	r, err := NewHTTP(Config{Listen: "127.0.0.1:0", MaxMessageSize: 1 << 20, MaxInflightBytes: budget}, pipeline.Settings{Name: "otlp"})
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	run(t, r, s)
	url := "http://" + r.Addr().String() + TracesPath
	type answer struct {
		status int
		retry  string
		body   string
	}
	send := func(body io.Reader, size int64, encoding string) answer {
		req, err := http.NewRequest(http.MethodPost, url, body)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/x-protobuf")
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{body: err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
	}

	// Holders announce 1 MiB bodies and send nothing: each holds 1 MiB+1
	// of the budget, so three fit and the other five are refused at once.
	var pipes []*io.PipeWriter
	held := make(chan answer, 8)
	for range 8 {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		go func() { held <- send(pr, 1<<20, "") }()
	}
	for range 5 {
		select {
		case a := <-held:
			if a.status != http.StatusTooManyRequests || a.retry == "" || !strings.Contains(a.body, "max_inflight_bytes") {
				t.Errorf("a request beyond the budget: %+v; want 429 with Retry-After", a)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("requests beyond the budget were not refused")
		}
	}
	// Gzip bombs meanwhile: 10 MB of zeros each, 20 at once; the budget
	// left does not take one growing to max_message_size.
	bomb := gzipped(make([]byte, 10<<20))
	bombs := make(chan answer, 20)
	for range 20 {
		go func() { bombs <- send(bytes.NewReader(bomb), int64(len(bomb)), "gzip") }()
	}
	for range 20 {
		if a := <-bombs; a.status != http.StatusTooManyRequests || a.retry == "" {
			t.Errorf("a gzip bomb beyond the budget: %+v; want 429 with Retry-After", a)
		}
	}
	if p := r.c.inflight.peak.Load(); p > budget || p < 3*(1<<20+1) {
		t.Errorf("peak in-flight bytes %d; want the three holders' and at most %d", p, budget)
	}
	for _, pw := range pipes {
		pw.CloseWithError(errors.New("holder done"))
	}
	for range 3 {
		<-held
	}
	deadline := time.Now().Add(20 * time.Second)
	for r.c.inflight.used.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still accounted after every request ended", r.c.inflight.used.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// With the budget free, a bomb is refused for its size, and a normal
	// request gets through.
	if a := send(bytes.NewReader(bomb), int64(len(bomb)), "gzip"); a.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a gzip bomb alone: %+v; want 413", a)
	}
	body := protoBody(t, traces(5, 1))
	if a := send(bytes.NewReader(body), int64(len(body)), ""); a.status != http.StatusOK {
		t.Errorf("a normal request after: %+v", a)
	}
	s.waitFor(t, 5)
	if p := r.c.inflight.peak.Load(); p > budget {
		t.Errorf("peak in-flight bytes %d over the budget %d", p, budget)
	}
}

// TestInflightBudgetGRPC: messages being decoded, over all requests,
// never take more than max_inflight_bytes; one beyond it gets
// RESOURCE_EXHAUSTED with RetryInfo, and afterwards a client gets through.
func TestInflightBudgetGRPC(t *testing.T) {
	const budget = 4 << 20
	r, err := NewGRPC(Config{Listen: "127.0.0.1:0", MaxMessageSize: 1 << 20, MaxInflightBytes: budget,
		EmitTimeout: pipeline.Duration(time.Minute)}, pipeline.Settings{Name: "otlp"})
	if err != nil {
		t.Fatal(err)
	}
	out := &blocking{release: make(chan struct{})}
	run(t, r, out)
	conn := dialRaw(t, r.Addr().String(), nil)
	td := traces(1, 1)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName(strings.Repeat("x", 900<<10))
	big := protoBody(t, td)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := export(conn, big)
			errs <- err
		}()
	}
	var refused int
	select {
	case err := <-errs:
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "max_inflight_bytes") {
			t.Fatalf("first answer %v; want RESOURCE_EXHAUSTED naming max_inflight_bytes", err)
		}
		var retry *errdetails.RetryInfo
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				retry = ri
			}
		}
		if retry == nil || retry.RetryDelay.AsDuration() <= 0 {
			t.Errorf("details %v: want RetryInfo with a delay", st.Details())
		}
		refused++
	case <-time.After(30 * time.Second):
		t.Fatal("no request was refused")
	}
	close(out.release)
	for range 7 {
		if err := <-errs; err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("export: %v", err)
			}
			refused++
		}
	}
	if p := r.c.inflight.peak.Load(); p > budget || p < int64(len(big)) {
		t.Errorf("peak in-flight bytes %d; want between one message and %d", p, budget)
	}
	if r.c.inflight.used.Load() != 0 {
		t.Errorf("%d bytes still accounted", r.c.inflight.used.Load())
	}
	if _, err := export(conn, protoBody(t, traces(5, 2))); err != nil {
		t.Errorf("a normal request after: %v", err)
	}
	t.Logf("%d of 8 refused; peak %d bytes", refused, r.c.inflight.peak.Load())
}
