package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// onlyTraces is a trace sink that takes no records (pipeline.TracesOnly)
// and counts the batches it is given all the same.
type onlyTraces struct {
	traceSink
	batches atomic.Int64
}

func (s *onlyTraces) Consume(context.Context, *record.Batch) error { s.batches.Add(1); return nil }
func (s *onlyTraces) TracesOnly() bool                             { return true }

var _ pipeline.TracesOnly = (*onlyTraces)(nil)

// TestTracesOnlySinkGetsNoRecords: a sink that takes traces only gets
// every trace and no batch, alone and beside a sink that takes records
// (which gets every record), and the engine's counts are the same.
func TestTracesOnlySinkGetsNoRecords(t *testing.T) {
	const traces, per = 50, 4
	for _, withRecords := range []bool{false, true} {
		e := New(Settings{})
		only := &onlyTraces{}
		e.AddSink("store", only)
		mem := &memSink{}
		if withRecords {
			e.AddSink("log", mem)
		}
		e.AddSource("spans", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
			for i := range traces {
				var b record.Batch
				for j := range per {
					trace.AppendSpan(&b, trace.ID{Lo: uint64(i + 1)}, &trace.Span{SpanID: trace.SpanID(j + 1), Operation: "op", Start: 1, End: 2})
				}
				if err := out.Consume(ctx, &b); err != nil {
					return err
				}
			}
			return nil
		}))
		if err := e.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := only.batches.Load(); n != 0 {
			t.Errorf("records too %v: the traces-only sink got %d batches", withRecords, n)
		}
		spans := 0
		for _, tr := range only.traces {
			spans += len(tr.Spans)
		}
		if len(only.traces) != traces || spans != traces*per {
			t.Errorf("records too %v: %d traces of %d spans, want %d of %d", withRecords, len(only.traces), spans, traces, traces*per)
		}
		if withRecords && mem.count() != traces*per {
			t.Errorf("the record sink got %d records, want %d", mem.count(), traces*per)
		}
		if got := e.Stats().Records; got != traces*per {
			t.Errorf("records too %v: the engine counted %d records, want %d", withRecords, got, traces*per)
		}
	}
}
