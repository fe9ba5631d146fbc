package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// otlpRequests makes n distinct ExportTraceServiceRequests (protobuf) of
// per spans each: 4 services, traces of 8 server and client spans with
// HTTP and database attributes, random ids.
func otlpRequests(n, per int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 28))
	out := make([][]byte, n)
	for i := range out {
		td := ptrace.NewTraces()
		for s := 0; s < per; {
			rs := td.ResourceSpans().AppendEmpty()
			ra := rs.Resource().Attributes()
			ra.PutStr("service.name", fmt.Sprintf("svc-%d", r.IntN(4)))
			ra.PutStr("host.name", fmt.Sprintf("node-%d", r.IntN(4)))
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
			var tid pcommon.TraceID
			for k := range tid {
				tid[k] = byte(r.Uint32())
			}
			var parent pcommon.SpanID
			start := time.Now().Add(-time.Second)
			for k := 0; k < 8 && s < per; k, s = k+1, s+1 {
				sp := ss.Spans().AppendEmpty()
				sp.SetTraceID(tid)
				var sid pcommon.SpanID
				for j := range sid {
					sid[j] = byte(r.Uint32())
				}
				sp.SetSpanID(sid)
				sp.SetParentSpanID(parent)
				parent = sid
				sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(k) * time.Millisecond)))
				sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(20-k) * time.Millisecond)))
				if k%2 == 0 {
					sp.SetName("GET /api/cart")
					sp.SetKind(ptrace.SpanKindServer)
					sp.Attributes().PutStr("http.request.method", "GET")
					sp.Attributes().PutStr("url.path", fmt.Sprintf("/api/cart/%d", r.IntN(1_000_000)))
					sp.Attributes().PutInt("http.response.status_code", 200)
				} else {
					sp.SetName("SELECT carts")
					sp.SetKind(ptrace.SpanKindClient)
					sp.Attributes().PutStr("db.system", "postgresql")
					sp.Attributes().PutStr("db.statement", "SELECT * FROM carts WHERE user_id = $1")
				}
			}
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			panic(err)
		}
		out[i] = b
	}
	return out
}

// otlpRun is what an OTLP burst showed.
type otlpRun struct {
	lossRun
	answered time.Duration // until every request was answered
	retries  int64         // refusals (429, 503) retried
}

func (r otlpRun) String() string {
	recv := float64(r.records) / r.answered.Seconds()
	return fmt.Sprintf("%9d spans: answered at %5.2f M spans/s, stream took them at %5.2f M spans/s (%.2f of the receivers' rate); %d refusals retried; stream got %d, told of %d missed, engine dropped %d: lossless %v; bridge peak RSS %d MiB",
		r.records, recv/1e6, r.streamRate()/1e6, r.streamRate()/recv, r.retries, r.streamed, r.missed, r.overflow, r.lossless(), r.peakRSS>>20)
}

// otlpLoss sends spans spans over OTLP/HTTP (protobuf) from clients
// concurrent clients, each sending its next request when the last is
// answered, to a fresh bridge whose only receiver is otlp-http; it times
// the answers and the stream sink, then counts what the stream's
// repository holds with a subscriber from its start.
func otlpLoss(ctx context.Context, o options, spans, clients int, dir, streamExtra string) (otlpRun, error) {
	const per = 256
	reqs := otlpRequests(64, per, 1)
	n := (spans + per - 1) / per
	res := otlpRun{lossRun: lossRun{records: int64(n * per)}}
	b, err := startBridgeOn(ctx, o.bin, dir, "otlp-http", streamExtra)
	if err != nil {
		return res, err
	}
	defer b.stop()
	url := "http://" + strings.TrimPrefix(strings.TrimPrefix(b.addr, "http://"), "https://")
	if !strings.HasSuffix(url, "/v1/traces") {
		url += "/v1/traces"
	}
	var next, retries atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, clients)
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			hc := &http.Client{Timeout: time.Minute}
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				for {
					resp, err := hc.Post(url, "application/x-protobuf", bytes.NewReader(reqs[i%int64(len(reqs))]))
					if err != nil {
						errs[c] = err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
						retries.Add(1)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					if resp.StatusCode != http.StatusOK {
						errs[c] = fmt.Errorf("OTLP/HTTP answered %s", resp.Status)
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	res.answered = time.Since(start)
	res.retries = retries.Load()
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	if err := waitStream(b, &res.lossRun, start, n*per); err != nil {
		return res, err
	}
	res.streamed, res.missed, err = countRepository(ctx, b.url, int64(n*per))
	_, res.peakRSS, _ = benchkit.Memory(b.cmd.Process.Pid)
	return res, err
}

// otlpTests runs OTLP bursts of growing size and says whether every one
// was lossless with the stream keeping the receivers' rate.
func otlpTests(ctx context.Context, o options, tmp string) (bool, error) {
	fmt.Printf("\nOTLP/HTTP: bursts from %d clients (256 spans a request), doubling from %d to %d spans:\n", o.otlpClients, o.otlpFrom, o.otlpTo)
	ok := true
	worst := 0.0
	for n := o.otlpFrom; n <= o.otlpTo; n *= 2 {
		r, err := otlpLoss(ctx, o, n, o.otlpClients, filepath.Join(tmp, fmt.Sprintf("otlp-%d", n)), "")
		if err != nil {
			return false, err
		}
		fmt.Println("  " + r.String())
		q := r.streamRate() / (float64(r.records) / r.answered.Seconds())
		if worst == 0 || q < worst {
			worst = q
		}
		ok = ok && r.lossless()
	}
	fmt.Printf("OTLP/HTTP: every burst lossless: %v; the stream's rate ÷ the receivers' (answered) rate, lowest: %.2f (aim: at least %.2f)\n", ok, worst, aimKeepUp)
	return ok && worst >= aimKeepUp, nil
}
