package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// countingTraces is a traces-only sink that counts the spans it gets.
type countingTraces struct{ spans atomic.Int64 }

func (s *countingTraces) Consume(context.Context, *record.Batch) error { return nil }
func (s *countingTraces) Flush() error                                 { return nil }
func (s *countingTraces) Close() error                                 { return nil }
func (s *countingTraces) TracesOnly() bool                             { return true }
func (s *countingTraces) TraceSources() trace.Sources                  { return trace.AllSources }
func (s *countingTraces) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	for _, t := range ts {
		s.spans.Add(int64(len(t.Spans)))
	}
	return nil
}

// BenchmarkAssemblyWorkers: span records (OTLP-like: traces of 8 spans,
// 256 spans a batch, a trace's spans in two batches) through the engine
// into a sink that counts the spans of the traces it gets, with one
// assembly worker and with one per core. ns/op is wall time per span,
// cpu-ns/span the process's CPU time (user and system, what a busy
// machine does not inflate); compare the sub-benchmarks of one run.
func BenchmarkAssemblyWorkers(b *testing.B) {
	const perBatch, perTrace, batches = 256, 8, 64
	rng := rand.New(rand.NewPCG(1, 2))
	var in []*record.Batch
	var traceN uint64
	for range batches {
		in = append(in, &record.Batch{Origin: record.Origin{Peer: "bench"}})
	}
	for i := range batches {
		for j := 0; j < perBatch/perTrace; j++ {
			traceN++
			id := trace.ID{Hi: rng.Uint64(), Lo: traceN}
			for k := range perTrace {
				// Half of a trace in this batch, half in the next.
				bt := in[(i+k/(perTrace/2))%batches]
				s := trace.Span{SpanID: trace.SpanID(k + 1), Operation: fmt.Sprintf("GET /api/%d", k), Service: "shop", Host: "h1",
					Start: int64(1000 * k), End: int64(1000*k + 500), Kind: trace.KindServer,
					Attributes: []trace.Attr{{Key: "http.route", Value: "/api/x", Type: trace.TypeString}, {Key: "user", Value: fmt.Sprint(rng.IntN(1e6)), Type: trace.TypeString}}}
				if k > 0 {
					s.ParentID = trace.SpanID(k)
				}
				trace.AppendSpan(bt, id, &s)
			}
		}
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.ReportAllocs()
			e := New(Settings{AssemblyWorkers: workers, Traces: trace.Options{Window: 50 * time.Millisecond}})
			sink := &countingTraces{}
			e.AddSink("store", sink)
			var sent int64
			e.AddSource("replay", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
				em := out.(pipeline.Emitter)
				c := em.(interface{ NewBatch() *record.Batch }).NewBatch()
				for i := 0; i < b.N; {
					src := in[(i/perBatch)%batches]
					// Each round gets trace ids of its own.
					round := uint64(i / (perBatch * batches))
					for r := range src.Records {
						c.AddRecord(&src.Records[r])
						v := c.Records[len(c.Records)-1].Values
						v[trace.SpanTraceIDHigh] = record.IntValue(v[trace.SpanTraceIDHigh].Int() ^ int64(round*0x9e3779b97f4a7c15))
					}
					i += src.Len()
					sent += int64(src.Len())
					var err error
					if c, err = em.Emit(ctx, c); err != nil {
						return err
					}
				}
				return nil
			}))
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			gc0 := ms.NumGC
			cpu0 := cpuTime()
			b.ResetTimer()
			if err := e.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(sent), "cpu-ns/span")
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.NumGC-gc0), "GCs")
			st := e.TraceStats()
			b.ReportMetric(float64(st.Spans)/float64(st.Traces), "spans/trace")
			if got := sink.spans.Load(); got != sent {
				b.Fatalf("%d spans in traces, want %d", got, sent)
			}
		})
	}
}

// cpuTime returns the process's user and system CPU time so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
