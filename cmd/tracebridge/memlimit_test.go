package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/record"
)

// The OTLP load of the memory-limit test: requests of loadTraces traces
// of loadSpans spans each, every trace id unique across the run.
const (
	loadTraces = 40
	loadSpans  = 50
)

// loadTemplate is one request, marshalled once; ids are the offsets of
// its trace ids' request number (4 bytes after an 8-byte marker).
type loadTemplate struct {
	body []byte
	ids  []int
}

var traceMarker = []byte("TBMEMLIM")

func newLoadTemplate(t *testing.T) loadTemplate {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "memlimit-load")
	rs.Resource().Attributes().PutStr("host.name", "memlimit-host")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("tracebridge-memlimit-test")
	now := time.Now()
	for tr := range loadTraces {
		var id [16]byte
		copy(id[:], traceMarker)
		binary.BigEndian.PutUint32(id[8:], 0xFFFFFFFF)
		binary.BigEndian.PutUint32(id[12:], uint32(tr))
		for s := range loadSpans {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID(id))
			sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, byte(s >> 8), byte(s) + 1})
			if s > 0 {
				p := (s - 1) / 3
				sp.SetParentSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, byte(p >> 8), byte(p) + 1})
			}
			sp.SetName(fmt.Sprintf("GET /api/orders/{id}/items/%d", s%7))
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(s) * time.Millisecond)))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(s+1) * time.Millisecond)))
			a := sp.Attributes()
			a.PutStr("http.url", fmt.Sprintf("https://shop.example.com/api/orders/%d/items/%d?session=%032x", tr, s, tr*1000+s))
			a.PutStr("http.user_agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)")
			a.PutStr("db.statement", fmt.Sprintf("SELECT id, name, price, stock FROM items WHERE order_id = %d AND position = %d", tr, s))
			a.PutInt("http.status_code", 200)
			a.PutStr("customer", fmt.Sprintf("customer-%d", s*31%97))
		}
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for off := 0; ; {
		i := bytes.Index(body[off:], traceMarker)
		if i < 0 {
			break
		}
		ids = append(ids, off+i+len(traceMarker))
		off += i + len(traceMarker)
	}
	if len(ids) != loadTraces*loadSpans {
		t.Fatalf("template: %d trace ids found, want %d", len(ids), loadTraces*loadSpans)
	}
	return loadTemplate{body: body, ids: ids}
}

// request returns request n's body: the template with n in its trace ids.
func (lt loadTemplate) request(n uint32, dst []byte) []byte {
	dst = append(dst[:0], lt.body...)
	for _, off := range lt.ids {
		binary.BigEndian.PutUint32(dst[off:], n)
	}
	return dst
}

// traceID is the hex trace id of trace tr of request n.
func loadTraceID(n uint32, tr int) string {
	var id [16]byte
	copy(id[:], traceMarker)
	binary.BigEndian.PutUint32(id[8:], n)
	binary.BigEndian.PutUint32(id[12:], uint32(tr))
	return hex.EncodeToString(id[:])
}

// rawBytesCodec sends and receives gRPC messages as they are.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return "proto" }
func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// loadStats count what the senders saw.
type loadStats struct {
	sent, acked, refused, tries atomic.Int64
	mu                          sync.Mutex
	ackedRequests               []uint32
	errs                        []string
}

func (s *loadStats) fail(format string, args ...any) {
	s.mu.Lock()
	if len(s.errs) < 10 {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
	}
	s.mu.Unlock()
}

// retryDelay is how long a client waits after a refusal: Retry-After (s)
// or RetryInfo, as the SDKs honour them; a second when they say nothing.
func retryDelayOf(h http.Header, st *status.Status) time.Duration {
	if h != nil {
		if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
	}
	if st != nil {
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay.AsDuration() > 0 {
				return ri.RetryDelay.AsDuration()
			}
		}
	}
	return time.Second
}

// sendOTLP sends request n until it is acknowledged (retrying on 429,
// 503, RESOURCE_EXHAUSTED, UNAVAILABLE after the delay the bridge asks
// for) or ctx ends; it reports whether it was acknowledged.
func sendOTLP(ctx context.Context, st *loadStats, body []byte, httpURL string, conn *grpc.ClientConn) bool {
	st.sent.Add(1)
	for {
		st.tries.Add(1)
		var wait time.Duration
		if conn != nil {
			var resp []byte
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := conn.Invoke(rctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &body, &resp)
			cancel()
			if err == nil {
				return true
			}
			s := status.Convert(err)
			switch s.Code() {
			case codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded:
				st.refused.Add(1)
				wait = retryDelayOf(nil, s)
			default:
				st.fail("grpc: %v", err)
				return false
			}
		} else {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, httpURL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-protobuf")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if ctx.Err() != nil {
					return false
				}
				st.fail("http: %v", err)
				wait = time.Second
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					return true
				case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
					st.refused.Add(1)
					wait = retryDelayOf(resp.Header, nil)
				default:
					st.fail("http: status %d", resp.StatusCode)
					return false
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// TestMemoryLimitUnderLoad: serve with memory_limit 160MiB takes an OTLP
// load far beyond what it can store (several senders of large requests
// over HTTP and gRPC, retrying on 429 / RESOURCE_EXHAUSTED as the SDKs
// do). It refuses some of it (counted in /metrics), its peak RSS stays
// within the limit plus a margin, it does not die, and every span it
// acknowledged is in the store afterwards. TRACEBRIDGE_MEMLIMIT_LOAD sets
// how long the senders offer new requests (default 20s; docs/OPERATIONS
// has a one-minute run).
func TestMemoryLimitUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a load of several hundred thousand spans")
	}
	loadFor := 20 * time.Second
	if s := os.Getenv("TRACEBRIDGE_MEMLIMIT_LOAD"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("TRACEBRIDGE_MEMLIMIT_LOAD: %v", err)
		}
		loadFor = d
	}
	const limit = 160 << 20
	// The margin: what the Go runtime does not count (the binary's pages,
	// the kernel's socket buffers charged to us) and what a sample
	// interval lets in.
	const margin = limit / 10
	// A trace window of 5 s keeps spans in the assembler long enough
	// that even a slow machine's intake reaches the limit.
	p := bridgetest.StartConfig(t, `memory_limit: 160MiB
metrics: "127.0.0.1:0"
traces: {window: 5s}
http: {listen: "127.0.0.1:0"}
receivers:
  - {name: grpc, type: otlp-grpc, listen: "127.0.0.1:0"}
  - {name: http, type: otlp-http, listen: "127.0.0.1:0"}
  - {name: kdb, type: tcp-server, listen: "127.0.0.1:0"}
sinks:
  - {name: store, type: store}
`)
	// Go's soft limit is 85 % of the limit less the binary's pages,
	// which depend on the build (-race makes them larger): between
	// 40 % and 85 % of the limit.
	if m := regexp.MustCompile(`(?m)^tracebridge: memory limit 160 MiB \(memory_limit\), Go's soft limit (\d+) MiB$`).FindStringSubmatch(p.Stdout()); m == nil {
		t.Errorf("no memory limit line:\n%s", p.Stdout())
	} else if g, _ := strconv.Atoi(m[1]); g < 64 || g > 136 {
		t.Errorf("Go's soft limit %d MiB for a limit of 160 MiB, want 64 to 136:\n%s", g, p.Stdout())
	}
	api := httpURL(t, p)
	lt := newLoadTemplate(t)

	// Sample RSS while the load runs (VmHWM is checked at the end too).
	var maxRSS atomic.Int64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss, _, err := benchkit.Memory(p.Pid()); err == nil && rss > maxRSS.Load() {
				maxRSS.Store(rss)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	conn, err := grpc.NewClient(p.Addr("grpc"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawBytesCodec{}), grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	httpTarget := "http://" + p.Addr("http") + "/v1/traces"
	ctx, cancel := context.WithTimeout(context.Background(), loadFor+90*time.Second)
	defer cancel()
	var st loadStats
	var next atomic.Uint32
	offerUntil := time.Now().Add(loadFor)
	var wg sync.WaitGroup
	const senders = 12
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *grpc.ClientConn
			if i%2 == 0 {
				c = conn
			}
			for time.Now().Before(offerUntil) && ctx.Err() == nil {
				n := next.Add(1)
				// A body of its own: an HTTP transport may still read a
				// request's body after its answer (or its context's end).
				body := lt.request(n, nil)
				if sendOTLP(ctx, &st, body, httpTarget, c) {
					st.acked.Add(1)
					st.mu.Lock()
					st.ackedRequests = append(st.ackedRequests, n)
					st.mu.Unlock()
				}
			}
		}()
	}

	// TCP back-pressure: a KDB sender whose writes block while the
	// bridge refuses; its records all arrive in the end.
	const kdbRecords = 200_000
	kdbDone := make(chan error, 1)
	go func() { kdbDone <- sendKDB(ctx, p.Addr("kdb"), kdbRecords) }()

	wg.Wait()
	t.Logf("senders done after %v", time.Since(offerUntil.Add(-loadFor)).Round(time.Millisecond))
	close(stopSampling)
	<-sampled
	if err := <-kdbDone; err != nil {
		t.Errorf("KDB sender: %v", err)
	}
	metric := func(name, label string) float64 {
		v, _, err := benchkit.Metric(p.Metrics, name, label)
		if err != nil {
			t.Fatalf("metrics: %v; stderr:\n%s", err, p.Stderr())
		}
		return v
	}
	select {
	case <-p.Done():
		t.Fatalf("serve died under load (exit %d); stderr:\n%s", p.ExitCode(), p.Stderr())
	default:
	}
	_, peak, err := benchkit.Memory(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	fileRSS := int64(-1)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid())); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "RssFile:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				fileRSS = kb << 10
			}
		}
	}
	refusals := metric("tracebridge_memory_refusals_total", `receiver="grpc"`) + metric("tracebridge_memory_refusals_total", `receiver="http"`)
	kdbWaits := metric("tracebridge_memory_refusals_total", `receiver="kdb"`)
	t.Logf("offered %d requests (%d spans) in %v, acknowledged %d (%d spans); %d tries, %d refused (%v counted by the memory limit; KDB reads held %v times); peak RSS %.1f MiB (sampled max %.1f MiB; the binary's pages %.1f MiB at the end) with a %d MiB limit",
		st.sent.Load(), st.sent.Load()*loadTraces*loadSpans, loadFor, st.acked.Load(), st.acked.Load()*loadTraces*loadSpans,
		st.tries.Load(), st.refused.Load(), refusals, kdbWaits, float64(peak)/(1<<20), float64(maxRSS.Load())/(1<<20), float64(fileRSS)/(1<<20), limit>>20)
	for _, e := range st.errs {
		t.Errorf("sender: %s", e)
	}
	if st.acked.Load() != st.sent.Load() {
		t.Errorf("%d of %d requests acknowledged: retrying clients must get everything in", st.acked.Load(), st.sent.Load())
	}
	if refusals == 0 || st.refused.Load() == 0 {
		t.Errorf("no refusals (%v counted, %d seen by the senders): the load did not reach the limit", refusals, st.refused.Load())
	}
	if peak > limit+margin {
		t.Errorf("peak RSS %.1f MiB, over the %d MiB limit plus %d MiB", float64(peak)/(1<<20), limit>>20, margin>>20)
	}

	// Every acknowledged span is in the store.
	want := map[string]bool{}
	for _, n := range st.ackedRequests {
		for tr := range loadTraces {
			want[loadTraceID(n, tr)] = true
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	var missing []string
	for {
		got := storedSpans(t, api)
		missing = missing[:0]
		for id := range want {
			if got[id] < loadSpans {
				missing = append(missing, fmt.Sprintf("%s (%d spans)", id, got[id]))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("store checked after %v", time.Since(offerUntil.Add(-loadFor)).Round(time.Millisecond))
	if len(missing) > 0 {
		t.Errorf("%d of %d acknowledged traces are not whole in the store, e.g. %v", len(missing), len(want), missing[:min(5, len(missing))])
	}
	if got := metric("tracebridge_records_received_total", `receiver="kdb"`); got != kdbRecords {
		t.Errorf("the KDB receiver took %v records, want %d", got, kdbRecords)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.Wait(0)
}

// storedSpans returns the span count of every trace the store's search
// finds, by trace id.
func storedSpans(t *testing.T, api string) map[string]int {
	t.Helper()
	got := map[string]int{}
	cursor := ""
	for {
		q := url.Values{"limit": {"100000"}, "budget": {"60s"}, "service": {"memlimit-load"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		code, body := apiGet(t, http.MethodGet, api+"/api/v1/traces?"+q.Encode(), "", "")
		if code != http.StatusOK {
			t.Fatalf("search: %d %s", code, body)
		}
		var res struct {
			Traces []struct {
				TraceID string `json:"traceId"`
				Spans   int    `json:"spans"`
			} `json:"traces"`
			More   bool   `json:"more"`
			Cursor string `json:"cursor"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		for _, tr := range res.Traces {
			got[tr.TraceID] += tr.Spans
		}
		if !res.More {
			return got
		}
		cursor = res.Cursor
	}
}

// sendKDB sends n CPUUtilizationRecords (records outside traces) in
// KDB's binary dialect on one connection and closes it.
func sendKDB(ctx context.Context, addr string, n int) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	cat := record.Builtin()
	m, err := kdb.DefaultMapping(cat)
	if err != nil {
		return err
	}
	enc := kdb.NewEncoder(m, kdb.Options{})
	typ := cat.Lookup(record.CPUUtilizationRecord)
	var b record.Batch
	var out []byte
	for i := range n {
		b.Reset()
		r := b.Add(typ, record.NoTimestamp)
		r.Values[0] = record.IntValue(int64(1_000_000 + i))
		r.Values[1] = record.StringValue("memlimit-host")
		r.Values[2] = record.StringValue(strconv.Itoa(i % 4))
		for f := 3; f < len(r.Values); f++ {
			r.Values[f] = record.DoubleValue(float64(i%100) / 100)
		}
		if out, err = enc.AppendBinary(out, r); err != nil {
			return err
		}
		if len(out) > 64<<10 || i == n-1 {
			if _, err := c.Write(out); err != nil {
				return fmt.Errorf("after %d records: %w", i, err)
			}
			out = out[:0]
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	// The bridge closes its end once it read everything.
	_, err = io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ctx.Err()
	}
	return err
}

// TestMemoryTargetDefault: `serve` without memory_limit and
// memory_target aims below memlimit.DefaultTarget (256 MiB): Go's soft
// limit is 85 % of it less the binary's pages, not the derived limit's;
// memory_limit alone sets no target.
func TestMemoryTargetDefault(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: serve keeps it")
	}
	const rest = `receivers: [{type: tcp-server, listen: "127.0.0.1:0"}]
sinks: [{type: kieker-log}]
`
	p := bridgetest.StartConfig(t, rest)
	m := regexp.MustCompile(`(?m)^tracebridge: memory limit \d+ MiB \([^)]*\), target 256 MiB, Go's soft limit (\d+) MiB$`).FindStringSubmatch(p.Stdout())
	if m == nil {
		t.Fatalf("no memory line with the default target:\n%s", p.Stdout())
	}
	if g, _ := strconv.Atoi(m[1]); g < 256/2*85/100 || g > 256*85/100 {
		t.Errorf("Go's soft limit %d MiB for the 256 MiB target, want 108-217", g)
	}
	p.Stop()
	q := bridgetest.StartConfig(t, "memory_limit: 1GiB\n"+rest)
	if !regexp.MustCompile(`(?m)^tracebridge: memory limit 1024 MiB \(memory_limit\), Go's soft limit \d+ MiB$`).MatchString(q.Stdout()) {
		t.Errorf("a target with memory_limit alone:\n%s", q.Stdout())
	}
}
