package engine

import (
	"context"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// assembly builds traces from the records on their way to the fan-out and
// hands every completed trace to the sinks that take traces, through the
// same queues as the records (behind the records it was built from). It
// runs on the drain goroutine.
type assembly struct {
	e         *Engine
	a         *trace.Assembler
	fan       *fanout
	pending   []*trace.Trace
	enrichers []pipeline.Enricher

	// pendingSpans counts the spans of pending; tickCtx is set while a
	// tick runs the assembler, which then hands on what it emits every
	// maxPendingSpans spans: a tick that ends many traces at once (the
	// last one ends every trace open) would otherwise build all their
	// spans before the sinks take the first.
	pendingSpans int
	tickCtx      context.Context
}

// maxTraceBacklog bounds the spans of the assembled traces queued for
// the trace consumers (summed over them) beyond which assembly makes no
// more at its tick: traces wait compact in the assembler (about 150 bytes
// a span) rather than assembled in the sinks' queues (about 1 KiB), so a
// store that is behind does not multiply the memory held.
const maxTraceBacklog = 50_000

// maxPendingSpans: see assembly.pendingSpans.
const maxPendingSpans = 1 << 16

// assembler returns the trace assembly the sinks ask for, or nil when no
// sink takes traces.
func (e *Engine) assembler(fan *fanout) *assembly {
	var want trace.Sources
	lean := true
	for _, s := range e.sinks {
		if tc, ok := s.sink.(pipeline.TraceConsumer); ok && tc.TraceSources() != 0 {
			want |= tc.TraceSources()
			l, ok := tc.(pipeline.LeanTraceConsumer)
			lean = lean && ok && l.LeanTraces()
		}
	}
	if want == 0 {
		return nil
	}
	as := &assembly{e: e, fan: fan}
	o := e.set.Traces
	o.Clock = trace.WallClock
	o.Sources = want
	o.Lean = lean
	o.Emit = func(t *trace.Trace) {
		as.pending = append(as.pending, t)
		as.pendingSpans += len(t.Spans)
		if as.tickCtx != nil && as.pendingSpans >= maxPendingSpans {
			as.hand(as.tickCtx)
		}
	}
	as.a = trace.NewAssembler(o)
	return as
}

func (as *assembly) Consume(ctx context.Context, b *record.Batch) error {
	as.a.AddBatch(b)
	err := as.fan.Consume(ctx, b)
	as.hand(ctx)
	return err
}

func (as *assembly) Emit(ctx context.Context, b *record.Batch) (*record.Batch, error) {
	as.a.AddBatch(b)
	nb, err := as.fan.Emit(ctx, b)
	as.hand(ctx)
	return nb, err
}

// tick emits the traces whose window has passed (all of them at the end).
func (as *assembly) tick(ctx context.Context, end bool) {
	as.tickCtx = ctx
	if end {
		as.a.Flush()
	} else {
		// Traces the sinks have not taken yet bound the ones made now.
		as.a.TickBudget(maxTraceBacklog - int(as.fan.traceBacklog.Load()))
	}
	as.tickCtx = nil
	as.hand(ctx)
	as.e.tmu.Lock()
	as.e.tstats = as.a.Stats()
	as.e.tmu.Unlock()
}

func (as *assembly) hand(ctx context.Context) {
	if len(as.pending) == 0 {
		return
	}
	ts := as.pending
	as.pending, as.pendingSpans = nil, 0
	for _, en := range as.enrichers {
		for _, t := range ts {
			en.Enrich(t)
		}
	}
	as.fan.traces(ctx, ts)
}
