package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// packedSink takes traces packed (as the store sink does).
type packedSink struct {
	traceSink
	sources trace.Sources
}

func (s *packedSink) PackedTraces() bool { return true }

func (s *packedSink) TraceSources() trace.Sources { return s.sources }

// TestPackedTracesOnlyForPackedSinks: traces of span records reach a sink
// that reads them packed as they are, and Spans for every sink that reads
// Spans (unpacked before any sink has them), with the same spans either
// way; a sink that does not want span traces does not unpack them, and
// two sinks reading packed traces (the default's store and Kieker log)
// both get them packed.
func TestPackedTracesOnlyForPackedSinks(t *testing.T) {
	for _, c := range []struct {
		name        string
		other       bool          // a sink reading Spans takes traces too
		sources     trace.Sources // of the other sink
		wantPacked  bool
		otherPacked bool // the other sink reads packed traces too
	}{
		{"alone", false, 0, true, false},
		{"with a Span reader", true, trace.AllSources, false, false},
		{"with a Kieker reader", true, trace.SourcesOf(trace.FromEvents), true, false},
		{"with another packed reader", true, trace.AllSources, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := New(Settings{})
			ps := &packedSink{sources: trace.AllSources}
			e.AddSink("store", ps)
			other := &packedSink{sources: c.sources} // (reads Spans: not a PackedTraceConsumer below)
			switch {
			case c.otherPacked:
				e.AddSink("other", other)
			case c.other:
				e.AddSink("other", &spanReader{traceSink: &other.traceSink, sources: c.sources})
			}
			e.AddSource("spans", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
				var b record.Batch
				for i := range 30 {
					trace.AppendSpan(&b, trace.ID{Lo: uint64(i/3 + 1)}, &trace.Span{SpanID: trace.SpanID(i%3 + 1), ParentID: trace.SpanID(i % 3),
						Operation: fmt.Sprint("op", i), Start: int64(10 - i%3), End: 20, Attributes: []trace.Attr{{Key: "k", Value: "v", Type: trace.TypeString}}})
				}
				return out.Consume(ctx, &b)
			}))
			if err := e.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(ps.traces) != 10 {
				t.Fatalf("%d traces, want 10", len(ps.traces))
			}
			var u trace.Unpacker
			for _, tr := range ps.traces {
				if (tr.Packed != nil) != c.wantPacked || tr.SpanCount() != 3 {
					t.Fatalf("trace %s packed %v with %d spans, want packed %v", tr.ID, tr.Packed != nil, tr.SpanCount(), c.wantPacked)
				}
				v := u.Trace(tr)
				for i, s := range v.Spans {
					if s.Depth != int32(i) || s.Operation != fmt.Sprint("op", (tr.ID.Lo-1)*3+uint64(i)) || len(s.Attributes) != 1 {
						t.Fatalf("trace %s span %d: %+v", tr.ID, i, s)
					}
				}
			}
			if c.other && c.sources.Has(trace.FromSpan) && len(other.traces) != 10 {
				t.Fatalf("the other sink got %d traces", len(other.traces))
			}
			for _, tr := range other.traces {
				if c.otherPacked {
					if tr.Packed == nil || tr.SpanCount() != 3 {
						t.Fatalf("trace %s handed on unpacked to a second sink reading packed traces (%d spans)", tr.ID, tr.SpanCount())
					}
					continue
				}
				if tr.Packed != nil || len(tr.Spans) != 3 {
					t.Fatalf("trace %s handed on packed (%v) to a sink reading Spans, %d spans", tr.ID, tr.Packed != nil, len(tr.Spans))
				}
			}
		})
	}
}

// spanReader is a trace sink that reads Spans (not packed).
type spanReader struct {
	*traceSink
	sources trace.Sources
}

func (s *spanReader) TraceSources() trace.Sources { return s.sources }

func (s *spanReader) ConsumeTraces(ctx context.Context, ts []*trace.Trace) error {
	return s.traceSink.ConsumeTraces(ctx, ts)
}
