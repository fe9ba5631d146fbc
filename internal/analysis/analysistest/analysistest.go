// Package analysistest is a test helper of the analyses: it reads a
// Kieker log through the trace assembler as tracebridge reads it.
package analysistest

import (
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Assemble reads the Kieker log in dir (the built-in record catalog)
// through the trace assembler on the records' clock, flushes it and
// hands emit every assembled trace, in the assembler's order.
func Assemble(t testing.TB, dir string, emit func(*trace.Trace)) {
	t.Helper()
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: emit})
	r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: record.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		a.AddBatch(b)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	a.Flush()
}

// Traces is Assemble collecting the traces.
func Traces(t testing.TB, dir string) []*trace.Trace {
	t.Helper()
	var ts []*trace.Trace
	Assemble(t, dir, func(tr *trace.Trace) { ts = append(ts, tr) })
	return ts
}

// Messages is Assemble handing add the message traces of every trace
// (analysis.Messages, default options; invalid ones left out), as
// sysmodel.Model.Add takes them.
func Messages(t testing.TB, dir string, add func(*analysis.MessageTrace)) {
	t.Helper()
	Assemble(t, dir, func(tr *trace.Trace) {
		ms, _ := analysis.Messages(tr, analysis.Options{})
		for _, mt := range ms {
			add(mt)
		}
	})
}
