package engine

import (
	"context"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// assembly builds traces from the records on their way to the fan-out and
// hands every completed trace to the sinks that take traces, through the
// same queues as the records (behind the records it was built from).
//
// With one worker (Settings.AssemblyWorkers 1, or a stage that enriches
// traces: enrichers run on the drain goroutine) it runs on the drain
// goroutine. With n workers it is sharded: each worker is a goroutine
// with an Assembler of its own that owns the traces whose routing key
// (trace.RouteKey: span records by trace id, every Kieker trace record
// on one worker) maps to it (trace.Shard). The drain goroutine hands a
// batch to the record sinks and then, shared (reference-counted, not
// copied), with each record's worker noted in the batch's item, to the
// workers that have records in it; each worker adds its own, completes
// traces and puts them into the trace consumers' queues itself. Ticks and
// the end travel to every worker through the same queues, so a worker
// sees them in order with the batches. Done callbacks travel as a token
// through every worker: the last worker to reach it puts the marker into
// the durable sinks' queues, behind the records (put by the drain before
// it sent the token) and behind every trace completed from the batches
// before it (each worker handed its traces on before passing the token).
type assembly struct {
	e         *Engine
	fan       *fanout
	enrichers []pipeline.Enricher

	opt    trace.Options
	want   int // workers asked for (Settings.AssemblyWorkers, 0: GOMAXPROCS)
	shards []*shard
	router trace.Router
	// sharded: workers run (between start and the end tick); the drain
	// goroutine's.
	sharded bool
	wg      sync.WaitGroup
	stats   []trace.Stats // per shard, under e.tmu
}

// shard is one worker's assembler and what it has completed and not
// handed on yet.
type shard struct {
	as *assembly
	id uint8
	a  *trace.Assembler
	in chan shardMsg // nil: the shard runs on the drain goroutine

	pending []*trace.Trace
	// pendingSpans counts the spans of pending; tickCtx is set while a
	// tick runs the assembler, which then hands on what it emits every
	// maxPendingSpans spans: a tick that ends many traces at once (the
	// last one ends every trace open) would otherwise build all their
	// spans before the sinks take the first.
	pendingSpans int
	tickCtx      context.Context
}

// shardMsg is one element of a worker's queue: a batch (it; the worker
// takes the records routed to it and releases it), a tick (with the
// worker's share of the trace budget), the end, or a settle token.
type shardMsg struct {
	it *item
	// all: every trace record of the batch is the worker's (it.route
	// is not read; a Kieker stream's batches).
	all    bool
	tick   bool
	budget int
	end    bool
	tok    *settleToken
}

// settleToken carries Done callbacks through the workers; the last one
// to reach it settles them.
type settleToken struct {
	done []func(error)
	left atomic.Int32
}

// maxTraceBacklog bounds the spans of the assembled traces queued for
// the trace consumers (summed over them) beyond which assembly makes no
// more at its tick: traces wait compact in the assembler (about 150 bytes
// a span) rather than assembled in the sinks' queues (about 1 KiB), so a
// store that is behind does not multiply the memory held. Sharded, each
// worker gets its share of what is left at a tick. Since ticks come every
// stageTick, it also bounds the spans a second that reach the trace
// sinks (327,680 at 32,768 a tick of 100 ms): keep it above what the
// bridge ingests.
const maxTraceBacklog = 32_768

// maxPendingSpans: see shard.pendingSpans.
const maxPendingSpans = 1 << 16

// maxWorkers bounds the assembly workers (a record's worker is a byte;
// noShard marks records of no trace).
const (
	maxWorkers = 64
	noShard    = 0xff
)

// shardQueue is the capacity of a worker's queue, in messages (batches
// mostly): enough to smooth the drain's bursts, little enough that the
// batches held there stay few.
const shardQueue = 8

// assembler returns the trace assembly the sinks ask for, or nil when no
// sink takes traces. Its workers begin at start.
func (e *Engine) assembler(fan *fanout) *assembly {
	var want trace.Sources
	lean, packed := true, false
	for _, s := range e.sinks {
		if tc, ok := s.sink.(pipeline.TraceConsumer); ok && tc.TraceSources() != 0 {
			want |= tc.TraceSources()
			l, ok := tc.(pipeline.LeanTraceConsumer)
			lean = lean && ok && l.LeanTraces()
			// Packed when a sink reads traces packed: the fan-out
			// unpacks those another sink takes too (fanout.traces).
			p, ok := tc.(pipeline.PackedTraceConsumer)
			packed = packed || ok && p.PackedTraces()
		}
	}
	if want == 0 {
		return nil
	}
	o := e.set.Traces
	o.Clock = trace.WallClock
	o.Sources = want
	o.Lean = lean
	o.Packed = packed
	return &assembly{e: e, fan: fan, opt: o, want: e.set.AssemblyWorkers}
}

// workers returns how many workers assemble: Settings.AssemblyWorkers
// (GOMAXPROCS when 0), one when a stage enriches traces.
func (as *assembly) workers() int {
	n := as.want
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if len(as.enrichers) > 0 {
		// Enrichers read what their stage keeps on the drain goroutine.
		n = 1
	}
	return min(max(n, 1), maxWorkers)
}

// start makes the shards and starts their workers (none with one shard:
// it runs on the drain goroutine). Call it once the enrichers are known,
// before the first batch.
func (as *assembly) start(ctx context.Context) {
	n := as.workers()
	as.shards = make([]*shard, n)
	as.stats = make([]trace.Stats, n)
	o := as.opt
	// Enrichers read a trace's Spans.
	o.Packed = o.Packed && len(as.enrichers) == 0
	if n > 1 {
		// The open traces are bounded for the whole bridge, not per
		// worker.
		if o.MaxOpenTraces <= 0 {
			o.MaxOpenTraces = trace.DefaultMaxOpenTraces
		}
		o.MaxOpenTraces = max(o.MaxOpenTraces/n, 1)
	}
	for i := range as.shards {
		sh := &shard{as: as, id: uint8(i)}
		so := o
		so.Emit = func(t *trace.Trace) {
			sh.pending = append(sh.pending, t)
			sh.pendingSpans += t.SpanCount()
			if sh.tickCtx != nil && sh.pendingSpans >= maxPendingSpans {
				sh.hand(sh.tickCtx)
			}
		}
		sh.a = trace.NewAssembler(so)
		as.shards[i] = sh
	}
	if n == 1 {
		return
	}
	as.sharded = true
	for _, sh := range as.shards {
		sh.in = make(chan shardMsg, shardQueue)
		as.wg.Add(1)
		go sh.run(ctx)
	}
}

func (as *assembly) Consume(ctx context.Context, b *record.Batch) error {
	if !as.sharded {
		sh := as.shards[0]
		sh.a.AddBatch(b)
		err := as.fan.Consume(ctx, b)
		sh.hand(ctx)
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	// The workers read the batch after Consume returned: they get a copy
	// (as the sinks do).
	c := as.fan.newBatch()
	c.Copy(b)
	c.Origin = b.Origin
	return as.dispatch(ctx, c)
}

func (as *assembly) Emit(ctx context.Context, b *record.Batch) (*record.Batch, error) {
	if !as.sharded {
		sh := as.shards[0]
		sh.a.AddBatch(b)
		nb, err := as.fan.Emit(ctx, b)
		sh.hand(ctx)
		return nb, err
	}
	if b.Len() == 0 {
		return b, nil
	}
	err := as.dispatch(ctx, b)
	return as.fan.newBatch(), err
}

// dispatch routes b's records to the workers, hands b to the sinks that
// take records, then to the workers that have records in it. It takes b.
func (as *assembly) dispatch(ctx context.Context, b *record.Batch) error {
	it := as.fan.newItem(b)
	n := len(as.shards)
	route := it.route[:0]
	var mask uint64
	for i := range b.Records {
		s := uint8(noShard)
		if key, ok := as.router.Key(&b.Records[i]); ok {
			s = uint8(trace.Shard(key, n))
			mask |= 1 << s
		}
		route = append(route, s)
	}
	it.route = route
	k := bits.OnesCount64(mask)
	err := as.fan.share(ctx, it, k)
	for m := mask; m != 0; m &= m - 1 {
		sh := as.shards[bits.TrailingZeros64(m)]
		// (A record of no trace is ignored by every assembler: with one
		// worker, the batch is all its own.)
		if !sh.send(ctx, shardMsg{it: it, all: k == 1}) {
			it.release()
		}
	}
	return err
}

// send puts m into the worker's queue; false when the fan-out was aborted
// (a worker stuck behind a sink that will not take more).
func (sh *shard) send(ctx context.Context, m shardMsg) bool {
	select {
	case sh.in <- m:
		return true
	case <-sh.as.fan.aborted:
		return false
	case <-ctx.Done():
		return false
	}
}

// run is a worker: it takes its queue's messages in order until the end.
func (sh *shard) run(ctx context.Context) {
	defer sh.as.wg.Done()
	for m := range sh.in {
		switch {
		case m.it != nil && m.all:
			sh.a.AddBatch(m.it.batch)
			m.it.release()
			sh.hand(ctx)
		case m.it != nil:
			sh.a.AddShard(m.it.batch, m.it.route, sh.id)
			m.it.release()
			sh.hand(ctx)
		case m.tok != nil:
			sh.hand(ctx)
			m.tok.arrive(ctx, sh.as.fan)
		case m.tick || m.end:
			sh.tick(ctx, m.end, m.budget)
		}
	}
}

// arrive notes that one more worker has handed on everything before the
// token; the last one settles its callbacks.
func (tok *settleToken) arrive(ctx context.Context, fan *fanout) {
	if tok.left.Add(-1) == 0 {
		fan.settle(ctx, tok.done, nil)
	}
}

// settle sends done callbacks behind the records and the traces handed on
// so far (see fanout.settle).
func (as *assembly) settle(ctx context.Context, done []func(error)) {
	if len(done) == 0 {
		return
	}
	if !as.sharded {
		as.fan.settle(ctx, done, nil)
		return
	}
	tok := &settleToken{done: done}
	tok.left.Store(int32(len(as.shards)))
	for _, sh := range as.shards {
		if !sh.send(ctx, shardMsg{tok: tok}) {
			tok.arrive(ctx, as.fan) // (the fan-out refuses it too: the callbacks hear why)
		}
	}
}

// tick emits the traces whose window has passed (all of them at the end,
// when the workers also stop).
func (as *assembly) tick(ctx context.Context, end bool) {
	budget := maxTraceBacklog - int(as.fan.traceBacklog.Load())
	if !as.sharded {
		as.shards[0].tick(ctx, end, budget)
		return
	}
	share := budget / len(as.shards)
	if budget > 0 {
		share = max(share, 1)
	}
	for _, sh := range as.shards {
		sh.send(ctx, shardMsg{tick: !end, end: end, budget: share})
		if end {
			close(sh.in)
		}
	}
	if end {
		as.wg.Wait()
		as.sharded = false
	}
}

// tick runs the shard's assembler's tick (its flush at the end) and hands
// on what it completed.
func (sh *shard) tick(ctx context.Context, end bool, budget int) {
	sh.tickCtx = ctx
	if end {
		sh.a.Flush()
	} else {
		// Traces the sinks have not taken yet bound the ones made now.
		sh.a.TickBudget(budget)
	}
	sh.tickCtx = nil
	sh.hand(ctx)
	as := sh.as
	as.e.tmu.Lock()
	as.stats[sh.id] = sh.a.Stats()
	var sum trace.Stats
	for _, st := range as.stats {
		sum.Records += st.Records
		sum.Traces += st.Traces
		sum.Spans += st.Spans
		sum.Broken += st.Broken
		sum.Untraced += st.Untraced
		sum.Duplicates += st.Duplicates
		sum.Evicted += st.Evicted
		sum.Early += st.Early
		sum.Parts += st.Parts
		sum.Open += st.Open
	}
	as.e.tstats = sum
	as.e.tmu.Unlock()
}

func (sh *shard) hand(ctx context.Context) {
	if len(sh.pending) == 0 {
		return
	}
	ts := sh.pending
	sh.pending, sh.pendingSpans = nil, 0
	for _, en := range sh.as.enrichers {
		for _, t := range ts {
			en.Enrich(t)
		}
	}
	sh.as.fan.traces(ctx, ts)
}
