package store

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/record"
	tstore "github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// kiekerBatches returns n generated Before/After events in traces of calls
// calls each (benchkit.TraceEvents), as batches of 1,024 records.
func kiekerBatches(tb testing.TB, n, calls int) []*record.Batch {
	rec, err := benchkit.NewRecorder(trace.Types(), benchkit.Signatures())
	if err != nil {
		tb.Fatal(err)
	}
	evs := benchkit.TraceEvents(1, 0, n, calls)
	var out []*record.Batch
	for i := 0; i < len(evs); i += 1024 {
		b := &record.Batch{}
		for j := i; j < min(i+1024, len(evs)); j++ {
			rec.Add(b, &evs[j], record.NoTimestamp)
		}
		out = append(out, b)
	}
	return out
}

// BenchmarkKiekerToStore measures what the store costs a Kieker event
// stream: Before/After events through the assembler (as the engine runs
// it) and, with the store, into the store's heads (encoded, summarised,
// written ahead). records/s is the figure; "assemble" is the baseline of
// the same run.
func BenchmarkKiekerToStore(b *testing.B) {
	for _, calls := range []int{1000, 10} {
		load := kiekerBatches(b, 200_000, calls)
		recs := 0
		for _, bt := range load {
			recs += len(bt.Records)
		}
		for _, store := range []bool{false, true} {
			name := map[bool]string{false: "assemble", true: "store"}[store]
			b.Run(fmt.Sprintf("calls=%d/%s", calls, name), func(b *testing.B) {
				var st *tstore.Store
				if store {
					var err error
					if st, err = tstore.Open(b.TempDir(), tstore.Options{}); err != nil {
						b.Fatal(err)
					}
					defer st.Close()
				}
				var pending []*trace.Trace
				a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Window: 1, Emit: func(t *trace.Trace) { pending = append(pending, t) }})
				hand := func() {
					if st != nil && len(pending) > 0 {
						if _, err := st.Append(pending); err != nil {
							b.Fatal(err)
						}
					}
					clear(pending)
					pending = pending[:0]
				}
				b.ReportAllocs()
				cpu0 := cpuTime()
				b.ResetTimer()
				n := 0
				for n < b.N {
					for _, bt := range load {
						a.AddBatch(bt)
						a.Tick()
						hand()
					}
					a.Flush()
					hand()
					n += recs
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds(), "records/CPU-s")
			})
		}
	}
}

// cpuTime returns the process's user and system CPU time: on a shared
// machine records per CPU-second are steadier than per second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// otlpBatches returns batches of span records shaped like bench/otlp's
// load (as internal/trace's benchSpans): traces of 8 spans alternating
// HTTP server spans (a path and a user id that never repeat) and database
// client spans, the resources of 8 services, one scope, an event on one
// span in 8, an error on one in 50. Strings that repeat are shared, as
// the OTLP decoder interns them.
func otlpBatches(batches, perBatch int) []*record.Batch {
	var res [8]*trace.Resource
	for i := range res {
		svc := "service-" + strconv.Itoa(i)
		res[i] = &trace.Resource{Attributes: []trace.Attr{
			{Key: "service.name", Value: svc, Type: trace.TypeString}, {Key: "service.version", Value: "1.4.2", Type: trace.TypeString},
			{Key: "host.name", Value: "node-" + strconv.Itoa(i), Type: trace.TypeString}, {Key: "process.pid", Value: strconv.Itoa(4000 + i), Type: trace.TypeInt},
			{Key: "telemetry.sdk.name", Value: "opentelemetry", Type: trace.TypeString}, {Key: "telemetry.sdk.language", Value: "go", Type: trace.TypeString},
			{Key: "telemetry.sdk.version", Value: "1.38.0", Type: trace.TypeString},
		}}
	}
	scope := &trace.Scope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.63.0"}
	svcs, hosts := make([]string, 8), make([]string, 8)
	for i := range svcs {
		svcs[i], hosts[i] = "service-"+strconv.Itoa(i), "node-"+strconv.Itoa(i)
	}
	var out []*record.Batch
	n := 0
	for range batches {
		b := &record.Batch{}
		for j := range perBatch {
			id := trace.ID{Hi: uint64(n/8 + 1), Lo: uint64(n/8+1) * 7}
			svc := n / 8 % 8
			s := trace.Span{SpanID: trace.SpanID(n + 1), Start: int64(1e15 + n*1000), End: int64(1e15 + n*1000 + 500_000),
				Service: svcs[svc], Host: hosts[svc], Resource: res[svc], Scope: scope}
			if n%8 != 0 {
				s.ParentID = trace.SpanID(n)
			}
			if j%2 == 0 {
				s.Operation, s.Kind = "GET /api/orders/{id}", trace.KindServer
				s.Attributes = []trace.Attr{{Key: "http.request.method", Value: "GET", Type: trace.TypeString},
					{Key: "http.route", Value: "/api/orders/{id}", Type: trace.TypeString},
					{Key: "url.path", Value: "/api/orders/" + strconv.Itoa(n*7919), Type: trace.TypeString},
					{Key: "http.response.status_code", Value: "200", Type: trace.TypeInt},
					{Key: "server.address", Value: "shop.example.com", Type: trace.TypeString},
					{Key: "server.port", Value: "8443", Type: trace.TypeInt},
					{Key: "user_agent.original", Value: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)", Type: trace.TypeString},
					{Key: "enduser.id", Value: "user-" + strconv.Itoa(n*31), Type: trace.TypeString}}
			} else {
				s.Operation, s.Kind = "SELECT orders", trace.KindClient
				s.Attributes = []trace.Attr{{Key: "db.system", Value: "postgresql", Type: trace.TypeString},
					{Key: "db.statement", Value: "SELECT * FROM orders WHERE id = $1", Type: trace.TypeString},
					{Key: "db.name", Value: "shop", Type: trace.TypeString}, {Key: "thread.id", Value: "17", Type: trace.TypeInt}}
			}
			if n%8 == 3 {
				s.Events = []trace.Event{{Name: "cache.miss", Time: s.Start + 100, Attributes: []trace.Attr{{Key: "cache.key", Value: "k" + strconv.Itoa(n), Type: trace.TypeString}}}}
			}
			if n%50 == 7 {
				s.Status, s.StatusMessage = trace.StatusError, "boom"
			}
			trace.AppendSpan(b, id, &s)
			n++
		}
		out = append(out, b)
	}
	return out
}

// BenchmarkSpansToStore measures tb-store's path after decoding (bench/otlp):
// OTLP-like span records through the assembler (a window that closes a
// trace two rounds of batches after its spans came, as a running
// bridge's) into the store (encoded, summarised, written ahead; a head
// cut into a block and written when full, as serve's). cpu-ns/span is
// the figure: the process's CPU time per span, the store's uploader and
// the garbage collector included; B/span the store's bytes per span
// after a last Flush.
func BenchmarkSpansToStore(b *testing.B) {
	for _, packed := range []bool{true, false} {
		// packed=true is serve's path with the store as the only trace
		// consumer (trace.Options.Packed); false makes every trace's
		// Spans, as when another consumer takes the traces too.
		b.Run("packed="+strconv.FormatBool(packed), func(b *testing.B) { spansToStore(b, packed) })
	}
}

func spansToStore(b *testing.B, packed bool) {
	bs := otlpBatches(64, 256)
	st, err := tstore.Open(b.TempDir(), tstore.Options{HeadSize: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Unix(0, 0)
	var pending []*trace.Trace
	spans := 0
	a := trace.NewAssembler(trace.Options{Window: time.Second, Now: func() time.Time { return now }, Packed: packed,
		Emit: func(t *trace.Trace) { pending = append(pending, t); spans += t.SpanCount() }})
	hand := func() {
		if len(pending) > 0 {
			if _, err := st.Append(pending); err != nil {
				b.Fatal(err)
			}
		}
		clear(pending)
		pending = pending[:0]
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for r, i := 0, 0; i < b.N; r++ {
		for _, bt := range bs {
			v := bt.Records
			for k := range v {
				// New trace ids each round (as bench/otlp's sends).
				v[k].Values[trace.SpanTraceIDHigh] = record.IntValue(v[k].Values[trace.SpanTraceIDLow].Int()/7 + int64(r)<<40)
			}
			a.AddBatch(bt)
			i += len(bt.Records)
		}
		now = now.Add(500 * time.Millisecond)
		a.Tick()
		hand()
	}
	a.Flush()
	hand()
	if err := st.Sync(); err != nil {
		b.Fatal(err)
	}
	runtime.GC() // the garbage made is part of the cost
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(max(spans, 1)), "cpu-ns/span")
	if err := st.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Size())/float64(max(spans, 1)), "B/span")
}
