package analysis

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// BenchmarkAnalyzer measures Add over the bookstore log's 100 traces
// (396 calls), assembled once.
func BenchmarkAnalyzer(b *testing.B) {
	var traces []*trace.Trace
	assemble(b, logDir(b, "kieker-1.10-binary-event-trace"), func(t *trace.Trace) { traces = append(traces, t) })
	calls := 0
	for _, t := range traces {
		calls += len(t.Spans)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		an := New(Options{})
		for _, t := range traces {
			an.Add(t)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}
