package engine

import (
	"context"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// gateSink takes traces one call at a time, each when the test lets it.
type gateSink struct {
	gate  chan struct{}
	spans int
}

func (s *gateSink) Consume(context.Context, *record.Batch) error { return nil }
func (s *gateSink) Flush() error                                 { return nil }
func (s *gateSink) Close() error                                 { return nil }
func (s *gateSink) TraceSources() trace.Sources                  { return trace.AllSources }
func (s *gateSink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	<-s.gate
	for _, t := range ts {
		s.spans += len(t.Spans)
	}
	return nil
}

// TestQueuedTraceSpansBounded: the parts of a huge trace wait in a slow
// sink's queue up to maxQueuedSpans spans, not queue_batches parts; the
// assembly waits for room (a durable sink) and loses nothing.
func TestQueuedTraceSpansBounded(t *testing.T) {
	const parts, partSpans = 12, 100_000
	e := New(Settings{})
	s := &gateSink{gate: make(chan struct{})}
	e.AddSink("slow", s)
	f := newFanout(e)
	r := f.runners[0]
	if r.policy != pipeline.Durable || cap(r.ch) < parts {
		t.Fatalf("policy %v, queue of %d", r.policy, cap(r.ch))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.start(ctx)
	part := &trace.Trace{ID: trace.KiekerID(1), Spans: make([]trace.Span, partSpans)}
	for i := range part.Spans {
		part.Spans[i].Source = trace.FromEvents
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for range parts {
			f.traces(ctx, []*trace.Trace{part})
		}
	}()
	for i := range parts {
		// Wait until what may be queued is (the sink holds part i).
		want := int64(min(maxQueuedSpans/partSpans, parts-i) * partSpans)
		deadline := time.Now().Add(30 * time.Second)
		for r.spans.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("part %d: %d spans queued, want %d", i, r.spans.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
		if q := r.spans.Load(); q > maxQueuedSpans {
			t.Fatalf("part %d: %d spans queued, more than %d", i, q, maxQueuedSpans)
		}
		s.gate <- struct{}{}
	}
	<-sent
	close(r.ch)
	<-r.done
	if s.spans != parts*partSpans || r.spans.Load() != 0 {
		t.Fatalf("the sink took %d spans of %d; %d counted as queued", s.spans, parts*partSpans, r.spans.Load())
	}
}
