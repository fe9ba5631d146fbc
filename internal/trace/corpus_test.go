package trace_test

import (
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestCorpusAssembles: every log of the shared corpus assembles; the
// numbers of traces and spans equal what a plain count of the records
// says: one trace per root TraceMetadata (a thread's metadata with a
// parent joins its parent's trace) and per OperationExecutionRecord
// traceId other than -1; one span per Before event, per uninstrumented
// call and per OperationExecutionRecord of a trace.
func TestCorpusAssembles(t *testing.T) {
	for _, name := range testcorpus.LogNames(t) {
		t.Run(name, func(t *testing.T) {
			r, err := kiekerlog.Open(testcorpus.Path(t, "kieker-logs", name), kiekerlog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var traces, spans int
			var broken []string
			a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) {
				traces++
				spans += len(tr.Spans)
				broken = append(broken, tr.Broken...)
			}})
			var want struct{ traces, spans int }
			oerTraces := map[int64]bool{}
			err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
				for i := range b.Records {
					rec := &b.Records[i]
					ti := trace.Classify(rec.Type)
					switch ti.Role {
					case trace.RoleMeta:
						id, parent := rec.Values[ti.TraceID].Int(), rec.Values[ti.ParentTraceID].Int()
						if parent == id || parent == -1 {
							want.traces++
						}
					case trace.RoleBefore:
						want.spans++
					case trace.RoleEvent:
						if ti.CalleeOp >= 0 && rec.Values[ti.CalleeOp].Str() != "" {
							want.spans++ // counted as a call of its own unless the callee's Before follows (none does in the corpus)
						}
					case trace.RoleOER:
						if id := rec.Values[ti.TraceID].Int(); id != -1 {
							want.spans++
							if !oerTraces[id] {
								oerTraces[id] = true
								want.traces++
							}
						}
					}
				}
				a.AddBatch(b)
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			a.Flush()
			if traces != want.traces || spans != want.spans {
				t.Fatalf("%d traces with %d spans, want %d with %d (broken: %v)", traces, spans, want.traces, want.spans, broken)
			}
			t.Logf("%d traces, %d spans, %d broken reasons", traces, spans, len(broken))
		})
	}
}
