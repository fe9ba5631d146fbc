package store

import (
	"fmt"
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
