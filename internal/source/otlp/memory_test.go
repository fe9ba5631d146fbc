package otlp

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

// refusals reads tracebridge_memory_refusals_total of receiver name.
func refusals(t *testing.T, reg *metrics.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tracebridge_memory_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "receiver" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestMemoryLimit: near the process's memory limit (a memlimit.Limiter
// whose usage the test sets) otlp-http answers 429 with Retry-After and
// otlp-grpc RESOURCE_EXHAUSTED with RetryInfo, nothing goes on, the
// refusals are counted per receiver; below it again, requests go through.
func TestMemoryLimit(t *testing.T) {
	var usage atomic.Int64
	lim := memlimit.New(memlimit.Options{Limit: 1000, Usage: func() (int64, bool) { return usage.Load(), true }})
	shared := &pipeline.Shared{}
	shared.SetMemory(lim)
	reg := metrics.New()
	start := func(typ string) (pipeline.Receiver, *sink) {
		var f pipeline.ReceiverFactory
		for _, rf := range Factories() {
			if rf.Type() == typ {
				f = rf
			}
		}
		cfg := f.NewConfig().(*Config)
		cfg.Listen = "127.0.0.1:0"
		r, err := f.NewReceiver(cfg, pipeline.Settings{Name: typ, Shared: shared, Metrics: reg})
		if err != nil {
			t.Fatal(err)
		}
		s := &sink{}
		servicetest.RunBridge(t, r, s)
		return r, s
	}
	hr, hs := start(TypeHTTP)
	gr, gs := start(TypeGRPC)
	conn := dialRaw(t, addrOf(gr), nil)
	body := protoBody(t, traces(4, 1))

	usage.Store(800) // above 70 % of Go's 85 %
	lim.Sample(time.Now())
	for i := range 3 {
		resp, msg := post{body: body, contentType: "application/x-protobuf"}.do(t, addrOf(hr))
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("request %d near the limit: status %d, Retry-After %q (%s); want 429 with Retry-After", i, resp.StatusCode, resp.Header.Get("Retry-After"), msg)
		}
		_, err := export(conn, body)
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("export %d near the limit: %v; want RESOURCE_EXHAUSTED", i, err)
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
	}
	if h, g := refusals(t, reg, TypeHTTP), refusals(t, reg, TypeGRPC); h != 3 || g != 3 {
		t.Errorf("refusals counted: http %v, grpc %v; want 3 each", h, g)
	}
	if recs, _ := hs.snapshot(); len(recs) != 0 {
		t.Errorf("%d records went on while refusing", len(recs))
	}

	usage.Store(500) // below 60 % of Go's 85 %
	lim.Sample(time.Now())
	if resp, msg := (post{body: body, contentType: "application/x-protobuf"}).do(t, addrOf(hr)); resp.StatusCode != http.StatusOK {
		t.Fatalf("below the limit again: status %d (%s)", resp.StatusCode, msg)
	}
	if _, err := export(conn, body); err != nil {
		t.Fatalf("below the limit again: %v", err)
	}
	hs.waitFor(t, 4)
	gs.waitFor(t, 4)
}
