package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// request is one pre-encoded ExportTraceServiceRequest.
type request struct {
	body  []byte
	spans int
	tids  []int // offsets of the spans' trace ids in body (16 bytes each)
}

// sendSeq numbers the requests sent in a run; every send rewrites its
// request's trace ids with its number (unique), so that no trace is sent
// twice: a server sees each trace once, as from real services (a trace id
// sent again within the trace window would be one trace with its spans
// twice: deduplicated by tracebridge's store, merged by Jaeger's).
var sendSeq atomic.Uint64

// stamp copies r's body into buf and makes its trace ids those of send
// number seq: the last 8 bytes of each are XORed with seq times an odd
// constant (a bijection, so two sends never share an id; trace ids of
// one request stay apart since they were random). Spans of one trace keep
// one trace id.
func (r *request) stamp(buf []byte, seq uint64) []byte {
	buf = append(buf[:0], r.body...)
	mask := seq * 0x9e3779b97f4a7c15
	for _, off := range r.tids {
		lo := buf[off+8 : off+16]
		binary.LittleEndian.PutUint64(lo, binary.LittleEndian.Uint64(lo)^mask)
	}
	return buf
}

// traceIDOffsets finds where the trace ids are in an encoded request:
// each span's field 1 (tag 0x0a, length 16) holding one of ids.
func traceIDOffsets(body []byte, ids []pcommon.TraceID) []int {
	var offs []int
	for _, id := range ids {
		pat := append([]byte{0x0a, 0x10}, id[:]...)
		for i := 0; ; {
			k := bytes.Index(body[i:], pat)
			if k < 0 {
				break
			}
			offs = append(offs, i+k+2)
			i += k + len(pat)
		}
	}
	slices.Sort(offs)
	return offs
}

var (
	services = []string{"frontend", "cart", "checkout", "payment", "shipping", "email", "currency", "ads"}
	routes   = []string{"/api/cart", "/api/checkout", "/api/products/{id}", "/api/currency", "/api/ads", "/healthz"}
	queries  = []string{"SELECT * FROM carts WHERE user_id = $1", "UPDATE stock SET n = n - $1 WHERE sku = $2", "INSERT INTO orders VALUES ($1, $2, $3)"}
)

// requests makes n distinct requests of spans spans each, as services
// instrumented with OpenTelemetry send them: one resource per service,
// server and client spans in traces of 8, HTTP and database attributes,
// an event on some spans, an error now and then. Identifiers and some
// values (paths with ids, user ids) differ in every request.
func requests(n, spans int, seed uint64) []request {
	r := rand.New(rand.NewPCG(seed, 17))
	out := make([]request, n)
	for i := range out {
		td := ptrace.NewTraces()
		var ids []pcommon.TraceID
		perService := spans / 4
		left := spans
		for left > 0 {
			k := min(perService, left)
			left -= k
			svc := services[r.IntN(len(services))]
			rs := td.ResourceSpans().AppendEmpty()
			ra := rs.Resource().Attributes()
			ra.PutStr("service.name", svc)
			ra.PutStr("service.version", "1.4.2")
			ra.PutStr("host.name", fmt.Sprintf("node-%d", r.IntN(4)))
			ra.PutInt("process.pid", int64(1000+r.IntN(50)))
			ra.PutStr("telemetry.sdk.language", "go")
			ra.PutStr("telemetry.sdk.name", "opentelemetry")
			ra.PutStr("telemetry.sdk.version", "1.47.0")
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
			ss.Scope().SetVersion("0.60.0")
			var tid pcommon.TraceID
			var parent pcommon.SpanID
			base := uint64(1_700_000_000_000_000_000) + r.Uint64N(1e15)
			for j := range k {
				if j%8 == 0 {
					fill(r, tid[:])
					ids = append(ids, tid)
					parent = pcommon.SpanID{}
				}
				s := ss.Spans().AppendEmpty()
				var sid pcommon.SpanID
				fill(r, sid[:])
				s.SetTraceID(tid)
				s.SetSpanID(sid)
				s.SetParentSpanID(parent)
				parent = sid
				route := routes[r.IntN(len(routes))]
				start := base + uint64(j)*10_000
				s.SetStartTimestamp(pcommon.Timestamp(start))
				s.SetEndTimestamp(pcommon.Timestamp(start + 1000 + r.Uint64N(1e6)))
				a := s.Attributes()
				if j%2 == 0 {
					s.SetName("GET " + route)
					s.SetKind(ptrace.SpanKindServer)
					a.PutStr("http.request.method", "GET")
					a.PutStr("http.route", route)
					a.PutStr("url.path", fmt.Sprintf("%s/%d", route, r.IntN(100000)))
					a.PutInt("http.response.status_code", 200)
					a.PutStr("server.address", svc+".shop.svc")
					a.PutInt("server.port", 8080)
					a.PutStr("user_agent.original", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36")
					a.PutStr("enduser.id", fmt.Sprintf("u%06d", r.IntN(1000000)))
				} else {
					s.SetName("db.query")
					s.SetKind(ptrace.SpanKindClient)
					a.PutStr("db.system", "postgresql")
					a.PutStr("db.statement", queries[r.IntN(len(queries))])
					a.PutStr("db.name", "shop")
					a.PutInt("thread.id", int64(r.IntN(16)))
				}
				if r.IntN(8) == 0 {
					e := s.Events().AppendEmpty()
					e.SetName("cache.miss")
					e.SetTimestamp(pcommon.Timestamp(start + 500))
					e.Attributes().PutStr("cache.key", route)
				}
				if r.IntN(50) == 0 {
					s.Status().SetCode(ptrace.StatusCodeError)
					s.Status().SetMessage("upstream timeout")
				}
			}
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			panic(err) // pdata marshals what it built
		}
		out[i] = request{body: body, spans: spans, tids: traceIDOffsets(body, ids)}
		if len(out[i].tids) != spans {
			panic(fmt.Sprintf("found %d trace ids in a request of %d spans", len(out[i].tids), spans))
		}
	}
	return out
}

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[0] |= 1 // never all zero
}

// sender sends one request, reporting a retryable refusal (back-pressure)
// apart from failures.
type sender interface {
	send(ctx context.Context, body []byte) (retry bool, err error)
	close()
}

// grpcSender exports over one gRPC connection, the message as it is.
type grpcSender struct{ conn *grpc.ClientConn }

func newGRPCSender(addr string) (*grpcSender, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, err
	}
	return &grpcSender{conn: conn}, nil
}

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

func (g *grpcSender) send(ctx context.Context, body []byte) (bool, error) {
	var resp []byte
	err := g.conn.Invoke(ctx, exportMethod, &body, &resp)
	if err != nil {
		switch status.Code(err) {
		case codes.ResourceExhausted, codes.Unavailable:
			return true, nil
		}
		return false, err
	}
	return false, checkResponse(resp)
}

func (g *grpcSender) close() { g.conn.Close() }

// answerTimeout is how long an HTTP request may wait for its answer:
// generous (a shared machine, a server pushing back), but a server that
// stops answering fails the run.
const answerTimeout = 5 * time.Minute

// httpSender posts to /v1/traces over keep-alive connections.
type httpSender struct {
	url    string
	client *http.Client
}

func newHTTPSender(addr string, conns int) *httpSender {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	return &httpSender{url: "http://" + addr + "/v1/traces", client: &http.Client{Transport: tr, Timeout: answerTimeout}}
}

func (h *httpSender) send(ctx context.Context, body []byte) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := h.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return false, checkResponse(b)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true, nil
	}
	return false, fmt.Errorf("POST %s: %s: %q", h.url, resp.Status, b)
}

func (h *httpSender) close() { h.client.CloseIdleConnections() }

// checkResponse fails on a partial success: every span must be taken.
func checkResponse(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	r := ptraceotlp.NewExportResponse()
	if err := r.UnmarshalProto(b); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	if n := r.PartialSuccess().RejectedSpans(); n > 0 {
		return fmt.Errorf("%d spans rejected: %s", n, r.PartialSuccess().ErrorMessage())
	}
	return nil
}

// rawCodec sends the pre-encoded bytes and hands back the response's.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// driven is what a load phase did.
type driven struct {
	spans, requests, retries int64
	wall                     time.Duration
}

// drive sends total spans (whole requests, round robin over reqs) with
// one sender per client, each client sending its next request once the
// previous one was answered. Every send carries new trace ids (stamp).
// Refusals are retried after a pause.
func drive(ctx context.Context, senders []sender, reqs []request, total int64) (driven, error) {
	per := int64(reqs[0].spans)
	n := (total + per - 1) / per
	var next, spans, retries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(senders))
	start := time.Now()
	for _, s := range senders {
		wg.Go(func() {
			var buf []byte
			for {
				i := next.Add(1) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				req := &reqs[i%int64(len(reqs))]
				buf = req.stamp(buf, sendSeq.Add(1))
				for {
					retry, err := s.send(ctx, buf)
					if err != nil {
						errs <- err
						return
					}
					if !retry {
						break
					}
					retries.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
				spans.Add(int64(req.spans))
			}
		})
	}
	wg.Wait()
	d := driven{spans: spans.Load(), requests: n, retries: retries.Load(), wall: time.Since(start)}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return d, errors.Join(all...)
}
