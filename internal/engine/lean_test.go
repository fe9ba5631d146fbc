package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// traceSink takes traces; lean says it needs their shape only.
type traceSink struct {
	lean   bool
	mu     sync.Mutex
	traces []*trace.Trace
}

func (s *traceSink) Consume(context.Context, *record.Batch) error { return nil }
func (s *traceSink) Flush() error                                 { return nil }
func (s *traceSink) Close() error                                 { return nil }
func (s *traceSink) TraceSources() trace.Sources                  { return trace.AllSources }
func (s *traceSink) LeanTraces() bool                             { return s.lean }
func (s *traceSink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces = append(s.traces, ts...)
	return nil
}

// TestLeanAssemblyOnlyWhenEverySinkIsLean: spans keep their attributes
// unless every sink that takes traces says it needs their shape only.
func TestLeanAssemblyOnlyWhenEverySinkIsLean(t *testing.T) {
	for _, c := range []struct {
		lean  []bool
		attrs int
	}{{[]bool{true}, 0}, {[]bool{true, false}, 1}, {[]bool{false}, 1}} {
		e := New(Settings{})
		var sinks []*traceSink
		for i, l := range c.lean {
			s := &traceSink{lean: l}
			sinks = append(sinks, s)
			e.AddSink(string(rune('a'+i)), s)
		}
		e.AddSource("spans", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
			var b record.Batch
			trace.AppendSpan(&b, trace.ID{Lo: 1}, &trace.Span{SpanID: 1, Operation: "GET /", Start: 1, End: 2,
				Attributes: []trace.Attr{{Key: "k", Value: "v", Type: trace.TypeString}}})
			return out.Consume(ctx, &b)
		}))
		if err := e.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, s := range sinks {
			if len(s.traces) != 1 || len(s.traces[0].Spans[0].Attributes) != c.attrs {
				t.Fatalf("sinks lean %v: %d traces %+v, want %d attributes", c.lean, len(s.traces), s.traces, c.attrs)
			}
		}
	}
}
