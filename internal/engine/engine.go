// Package engine is tracebridge's core, the role of the Kieker Data
// Bridge's ServiceContainer: it runs sources (receivers), passes what they
// decode through stages to sinks, reports progress, and shuts down without
// losing what was received. internal/serve builds an engine from a
// configuration; the public package bridge lets Go programs embed one.
//
// Goroutines: Run starts one goroutine per source (which starts its own per
// connection); sources hand batches to one bounded queue. One drain
// goroutine takes batches off that queue, runs the stages (which therefore
// need no locks) and hands every batch to the fan-out. When a sink takes
// traces, assembly runs on Settings.AssemblyWorkers goroutines (one per
// core by default), each owning the traces whose trace.RouteKey maps to
// it (assemble.go); with one it runs on the drain goroutine. The fan-out gives
// each sink a queue and a goroutine of its own, so a slow sink does not
// stall the others: a durable sink whose queue is full makes the fan-out
// wait (back-pressure reaches the sources); a best-effort sink whose queue
// is full loses its oldest batch, counted. A sink's goroutine alone calls
// its Consume; a second goroutine per sink flushes it every FlushInterval
// (sinks allow Flush concurrently with Consume); Close is called once both
// have ended.
//
// Delivery: a source that must know when its records are safe (a broker
// source acknowledging messages) attaches callbacks to a batch
// (record.Batch.Done). They are called once every durable sink has
// consumed the batch and flushed it (about one AckInterval later), or with
// the error when a durable sink failed. Best-effort sinks are not waited
// for. With a negative FlushInterval they wait for Close.
//
// Shutdown: when Run's context is cancelled, sources stop accepting and
// drain what their peers already sent; once every source has returned, the
// queue is drained through the stages into the sinks' queues, the sinks
// drain their queues, and are flushed and closed. Durable sinks get
// Settings.ShutdownTimeout; best-effort sinks BestEffortGrace, then a sink
// that implements pipeline.Aborter is aborted. A durable sink that still
// has records to deliver shortly after shutdown began is logged once, with
// their number; the records a sink failed to take during shutdown, or
// still held when it was aborted, are logged once at its end.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// heldTracker releases batches' Done callbacks once the stages have handed
// every record of the batch on. Stages keep input order, so with in
// records consumed so far and h held, the first in-h have been handed on.
// It runs on the drain goroutine.
type heldTracker struct {
	holders []pipeline.Holder
	in      int64
	waiting []waitingDone
}

type waitingDone struct {
	upto int64 // the batch's last record, counted from the start
	done []func(error)
}

func (t *heldTracker) add(done []func(error), n int) {
	t.in += int64(n)
	if len(done) > 0 {
		t.waiting = append(t.waiting, waitingDone{upto: t.in, done: done})
	}
}

// released returns the callbacks of the batches no record of which is held.
func (t *heldTracker) released() []func(error) {
	if len(t.waiting) == 0 {
		return nil
	}
	var held int64
	for _, h := range t.holders {
		held += int64(h.Held())
	}
	passed := t.in - held
	var out []func(error)
	i := 0
	for ; i < len(t.waiting) && t.waiting[i].upto <= passed; i++ {
		out = append(out, t.waiting[i].done...)
	}
	t.waiting = append(t.waiting[:0], t.waiting[i:]...)
	return out
}

const stageTick = 100 * time.Millisecond

// BestEffortGrace is how long shutdown waits for a best-effort sink to
// drain its queue before aborting it.
const BestEffortGrace = 2 * time.Second

// Listener hears about progress: count is the number of records handed to
// the sinks so far; message is empty for periodic updates.
type Listener func(count int64, message string)

// Settings configure an Engine. Zero values mean the defaults.
type Settings struct {
	Logger  *slog.Logger
	Metrics *metrics.Registry

	// QueueBatches bounds the batches waiting between sources and stages,
	// and is the default bound of each sink's queue (default 64). With
	// the sources' batch sizes it bounds memory (docs/ARCHITECTURE.md).
	QueueBatches int
	// FlushInterval is how often sinks are flushed (default 1 s); after
	// a kill -9, records handed to the sinks before the last flush are
	// readable. Negative: only at shutdown.
	FlushInterval time.Duration
	// ShutdownTimeout bounds draining after cancellation (default 30 s).
	ShutdownTimeout time.Duration
	// ShutdownHint, when set, is added (attribute hint) to the line that
	// says shutdown waits for a sink: how to stop at once (serve: a
	// second Ctrl-C).
	ShutdownHint string
	// AckInterval: while sources wait for Done callbacks (brokers waiting
	// to acknowledge), durable sinks are flushed this often instead
	// (default 20 ms), so a broker's window of unacknowledged messages
	// keeps moving.
	AckInterval time.Duration

	// Listener is called every ListenerInterval records (default 100, as
	// KDB's ServiceContainer does).
	Listener         Listener
	ListenerInterval int64

	// Traces configures the trace assembly the engine runs when a sink
	// takes traces (pipeline.TraceConsumer): window and limits. Its Emit,
	// Clock and Sources are the engine's.
	Traces trace.Options
	// AssemblyWorkers is how many goroutines assemble traces, each
	// owning the traces whose routing key (trace.RouteKey) maps to it:
	// 0 means GOMAXPROCS; 1 assembles on the drain goroutine. A stage
	// that enriches traces (pipeline.Enricher) makes it 1.
	AssemblyWorkers int

	// Stopping, when set, is called once Run has drained the receivers
	// and the stages, before the sinks are drained and closed: whatever
	// reads from a sink (the HTTP API reading the trace store) stops
	// there.
	Stopping func()
}

// SinkOptions say how the engine feeds a sink.
type SinkOptions struct {
	// Policy: durable (the default) or best-effort.
	Policy pipeline.Policy
	// QueueBatches bounds the sink's queue (default
	// Settings.QueueBatches).
	QueueBatches int
}

type namedSource struct {
	name string
	src  pipeline.Source
}

type namedSink struct {
	name string
	sink pipeline.Sink
	opts SinkOptions
	met  *metrics.Sink
}

// Engine runs sources, stages and sinks. Add them before Run.
type Engine struct {
	set     Settings
	log     *slog.Logger
	sources []namedSource
	stages  []pipeline.Stage
	sinks   []namedSink

	delivered atomic.Int64
	started   atomic.Int64 // unix nanos
	stopped   atomic.Int64
	first     atomic.Int64 // unix nanos of the first record handed to the sinks
	last      atomic.Int64 // and of the last

	sinkErrs lograte.Limiter // stage and hand-off failures: sinkErrsPerSecond lines a second

	tmu    sync.Mutex
	tstats trace.Stats // the assembler's, as of its last tick

	smu     sync.Mutex
	running *sourceSet // while Run runs
	fan     *fanout    // once Run has started
}

// TraceStats returns the trace assembler's counts as of its last tick
// (zero when no sink takes traces).
func (e *Engine) TraceStats() trace.Stats {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	return e.tstats
}

// maxQueuedBytes bounds the decoded batches waiting between the sources
// and the stages (record.Batch.Bytes), besides QueueBatches: 64 batches
// of 256 OTLP spans held about 25 MB, which the garbage collector's
// headroom doubles; about 10 such batches, or 11,000 Kieker records,
// keep the drain goroutine fed (docs/ARCHITECTURE.md, "Limits").
const maxQueuedBytes = 4 << 20

// The defaults of Settings.
const (
	DefaultQueueBatches    = 64
	DefaultFlushInterval   = time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// New returns an empty engine.
func New(s Settings) *Engine {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.QueueBatches <= 0 {
		s.QueueBatches = DefaultQueueBatches
	}
	if s.FlushInterval == 0 {
		s.FlushInterval = DefaultFlushInterval
	}
	if s.ShutdownTimeout <= 0 {
		s.ShutdownTimeout = DefaultShutdownTimeout
	}
	if s.ListenerInterval <= 0 {
		s.ListenerInterval = 100
	}
	if s.AckInterval <= 0 {
		s.AckInterval = 20 * time.Millisecond
	}
	return &Engine{set: s, log: s.Logger, sinkErrs: lograte.Limiter{PerSecond: sinkErrsPerSecond}}
}

// SetListenerUpdateInterval sets how many records pass between listener
// calls (KDB's setListenerUpdateInterval). Call before Run.
func (e *Engine) SetListenerUpdateInterval(n int64) {
	if n > 0 {
		e.set.ListenerInterval = n
	}
}

// AddSource adds a receiver under a name (used in logs, metrics and the
// batches' origin).
func (e *Engine) AddSource(name string, s pipeline.Source) {
	e.sources = append(e.sources, namedSource{name, s})
}

// AddStage adds a stage; stages run in the order added, before the sinks.
func (e *Engine) AddStage(s pipeline.Stage) { e.stages = append(e.stages, s) }

// AddSink adds a sink; every batch goes to every sink. Without options the
// sink is durable with the default queue bound.
func (e *Engine) AddSink(name string, s pipeline.Sink, opts ...SinkOptions) {
	var o SinkOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.QueueBatches <= 0 {
		o.QueueBatches = e.set.QueueBatches
	}
	e.sinks = append(e.sinks, namedSink{name: name, sink: s, opts: o, met: e.set.Metrics.Sink(name)})
}

// Stats describe a run.
type Stats struct {
	Records int64         // handed to the sinks
	Elapsed time.Duration // from Run's start to its end (or now)
	// Active is the time from the first record handed to the sinks to
	// the last (0 with fewer than two batches): the time the bridge was
	// busy, without the idle time before and after.
	Active time.Duration
}

// NanosPerRecord returns the active time per record (the run time when
// the active time is unknown; 0 without records).
func (s Stats) NanosPerRecord() float64 {
	if s.Records == 0 {
		return 0
	}
	return float64(s.busy().Nanoseconds()) / float64(s.Records)
}

// RecordsPerSecond returns the throughput over the active time.
func (s Stats) RecordsPerSecond() float64 {
	d := s.busy()
	if d <= 0 {
		return 0
	}
	return float64(s.Records) / d.Seconds()
}

func (s Stats) busy() time.Duration {
	if s.Active > 0 {
		return s.Active
	}
	return s.Elapsed
}

// Stats returns the counts so far.
func (e *Engine) Stats() Stats {
	start := e.started.Load()
	if start == 0 {
		return Stats{}
	}
	end := e.stopped.Load()
	if end == 0 {
		end = time.Now().UnixNano()
	}
	st := Stats{Records: e.delivered.Load(), Elapsed: time.Duration(end - start)}
	if f, l := e.first.Load(), e.last.Load(); f > 0 && l > f {
		st.Active = time.Duration(l - f)
	}
	return st
}

// Run runs the engine until ctx is cancelled, every source has ended by
// itself, or a source fails. It returns the first source error, joined with
// sink flush/close errors. Sinks are closed when Run returns.
func (e *Engine) Run(ctx context.Context) error {
	if len(e.sources) == 0 {
		return errors.New("bridge: no sources")
	}
	if len(e.sinks) == 0 {
		return errors.New("bridge: no sinks")
	}
	e.started.Store(time.Now().UnixNano())
	defer func() { e.stopped.Store(time.Now().UnixNano()) }()

	fan := newFanout(e)
	e.smu.Lock()
	e.fan = fan
	e.smu.Unlock()
	asm := e.assembler(fan)
	var end endpoint = fan
	if asm != nil {
		end = asm
	}
	var chain pipeline.Consumer = end
	built := make([]pipeline.Consumer, len(e.stages))
	for i := len(e.stages) - 1; i >= 0; i-- {
		chain = e.stages[i](chain)
		built[i] = chain
	}
	// Sources' Done callbacks are taken off before the stages see the
	// batch and travel through the durable sinks' queues behind its
	// records once the stages have handed them on.
	var holders []pipeline.Holder
	for _, st := range built {
		if h, ok := st.(pipeline.Holder); ok {
			holders = append(holders, h)
		}
		if en, ok := st.(pipeline.Enricher); ok && asm != nil {
			asm.enrichers = append(asm.enrichers, en)
		}
	}
	drainCtx := context.WithoutCancel(ctx)
	if asm != nil {
		asm.start(drainCtx)
	}
	head := &head{fan: fan, asm: asm, end: end, chain: chain, direct: len(built) == 0, track: &heldTracker{holders: holders}}
	q := pipeline.NewQueue(e.set.QueueBatches, head, e.sinkError)
	q.SetMaxBytes(maxQueuedBytes)
	fan.recycle, fan.newBatch = q.Recycle, q.NewBatch
	e.set.Metrics.SetQueueDepth(q.Depth)
	if asm != nil {
		e.set.Metrics.SetTraceStats(func() metrics.TraceCounts {
			st := e.TraceStats()
			return metrics.TraceCounts{Records: st.Records, Traces: st.Traces, Spans: st.Spans, Broken: st.Broken,
				Untraced: st.Untraced, Evicted: st.Evicted, Early: st.Early, Parts: st.Parts, Open: int64(st.Open), Duplicates: st.Duplicates}
		})
	}
	q.OnTick(stageTick, func(ctx context.Context) {
		for _, st := range built {
			if f, ok := st.(pipeline.Flusher); ok {
				if err := f.Flush(ctx); err != nil {
					e.sinkError(err)
				}
			}
		}
		if asm != nil {
			asm.tick(ctx, false)
		}
		head.settle(ctx, head.track.released())
	})

	fan.start(drainCtx)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		q.Run(drainCtx)
		// Stages hand on what they still hold, first stage first, on the
		// goroutine that owns them.
		for _, st := range built {
			if f, ok := st.(pipeline.Finisher); ok {
				if err := f.Finish(drainCtx); err != nil {
					e.sinkError(err)
				}
			}
		}
		if asm != nil {
			asm.tick(drainCtx, true) // (the workers end)
		}
		head.settle(drainCtx, head.track.released())
	}()

	srcCtx, cancelSources := context.WithCancel(ctx)
	defer cancelSources()
	var aborted atomic.Bool
	set := newSourceSet(e, srcCtx, cancelSources, q, &aborted)
	set.mu.Lock()
	for _, s := range e.sources {
		set.start(s.name, s.src)
	}
	set.mu.Unlock()
	e.smu.Lock()
	e.running = set
	e.smu.Unlock()
	sourcesDone := make(chan struct{})

	// Wait for the sources to end, bounding the drain once shutdown began.
	select {
	case <-set.ended:
	case <-srcCtx.Done():
	}
	cancelSources()
	go func() { set.wg.Wait(); close(sourcesDone) }()
	// The receivers get ShutdownTimeout to drain, then the sinks as much
	// again.
	fan.stopping.Store(true)
	wait := newShutdownWait(fan, time.Now().Add(2*e.set.ShutdownTimeout), e.set.ShutdownTimeout)
	defer wait.notice.Stop()
	if !wait.until(sourcesDone, time.Now().Add(e.set.ShutdownTimeout)) {
		e.log.Error("shutdown timeout: receivers did not finish draining; aborting", "timeout", e.set.ShutdownTimeout)
		aborted.Store(true)
		q.Abort()
		<-sourcesDone
	}
	firstErr := set.err()
	deadline := time.Now().Add(e.set.ShutdownTimeout)
	wait.bound = deadline
	q.Close()
	if !wait.until(drained, deadline) {
		e.log.Error("shutdown timeout: sinks did not drain the queue; aborting", "timeout", e.set.ShutdownTimeout, "queued_batches", q.Depth())
		q.Abort()
		fan.abort()
		select {
		case <-drained:
		case <-time.After(time.Second):
			// A durable sink is stuck inside Consume: its goroutine
			// cannot be stopped, and closing the sinks under it is not
			// safe.
			return errors.Join(firstErr, errors.New("bridge: a sink is stuck; records still queued were lost"))
		}
	}
	if e.set.Stopping != nil {
		e.set.Stopping()
	}
	closeErrs := fan.stop(wait)
	if l := e.set.Listener; l != nil {
		l(e.delivered.Load(), "stopped")
	}
	return errors.Join(append([]error{firstErr}, closeErrs...)...)
}

// SinkRecords counts records of one sink.
type SinkRecords struct {
	Sink    string
	Records int64
}

// Undelivered returns, for each sink that has any, the records handed to
// it that it has not taken yet (queued, or in a Consume that has not
// returned) and those it failed to take since shutdown began: what is lost
// when the process ends now. Safe to call while Run runs (a second Ctrl-C
// during shutdown: serve reports them before it exits).
func (e *Engine) Undelivered() []SinkRecords {
	e.smu.Lock()
	fan := e.fan
	e.smu.Unlock()
	if fan == nil {
		return nil
	}
	var out []SinkRecords
	for _, r := range fan.runners {
		if n := r.pending.Load() + r.lost.Load(); n > 0 {
			out = append(out, SinkRecords{r.name, n})
		}
	}
	return out
}

// head is the consumer the queue drains into: it takes the batch's Done
// callbacks off, runs the stages (or, without stages, hands the batch to
// the fan-out without copying) and settles the callbacks the stages have
// released. It runs on the drain goroutine.
type head struct {
	fan    *fanout
	asm    *assembly // nil: no sink takes traces
	end    endpoint  // the fan-out, or the assembler in front of it
	chain  pipeline.Consumer
	direct bool
	track  *heldTracker
}

// endpoint is what the stages hand on to: the fan-out, or the trace
// assembler in front of it.
type endpoint interface {
	pipeline.Consumer
	pipeline.Emitter
}

func (h *head) Consume(ctx context.Context, b *record.Batch) error {
	done := b.TakeDone()
	n := b.Len()
	err := h.chain.Consume(ctx, b)
	h.after(ctx, done, n, err)
	return err
}

func (h *head) Emit(ctx context.Context, b *record.Batch) (*record.Batch, error) {
	// Stages that take batches over (a filter in front of the fan-out)
	// keep the hand-over free of copies too.
	em, ok := h.chain.(pipeline.Emitter)
	if h.direct {
		em, ok = h.end, true
	}
	if !ok {
		return b, h.Consume(ctx, b)
	}
	done := b.TakeDone()
	n := b.Len()
	nb, err := em.Emit(ctx, b)
	h.after(ctx, done, n, err)
	return nb, err
}

func (h *head) after(ctx context.Context, done []func(error), n int, err error) {
	if err != nil {
		callAll(done, err)
	} else {
		h.track.add(done, n)
	}
	h.settle(ctx, h.track.released())
}

// settle sends the released callbacks behind what was handed on so far:
// through the assembly workers when they run (behind the traces they
// complete), else straight to the fan-out.
func (h *head) settle(ctx context.Context, done []func(error)) {
	if h.asm != nil {
		h.asm.settle(ctx, done)
		return
	}
	h.fan.settle(ctx, done, nil)
}

// stamp hands a source's batches to the queue with the receiver's name in
// their origin.
type stamp struct {
	q    *pipeline.Queue
	name string
}

func (s stamp) Consume(ctx context.Context, b *record.Batch) error {
	if b.Origin.Receiver == "" {
		b.Origin.Receiver = s.name
	}
	return s.q.Consume(ctx, b)
}

// NewBatch returns an empty batch from the queue's pool.
func (s stamp) NewBatch() *record.Batch { return s.q.NewBatch() }

func (s stamp) Emit(ctx context.Context, b *record.Batch) (*record.Batch, error) {
	if b.Origin.Receiver == "" {
		b.Origin.Receiver = s.name
	}
	return s.q.Emit(ctx, b)
}

// sinkErrsPerSecond is how many sink failures are logged a second.
const sinkErrsPerSecond = 5

// faultSettle is how long a sink must work again before the end of its
// failures is logged: a cluster that heals stores one flush and may fail
// the next while its streams elect leaders, which is the same outage.
const faultSettle = 2 * time.Second

// sinkError logs the failures of the stages' Flush and Finish and of the
// hand-off to the sinks, at most sinkErrsPerSecond a second. (A sink's own
// Consume and Flush failures are logged by its runner, once when they
// start and once when they end.)
func (e *Engine) sinkError(err error) {
	e.sinkErrs.Log(context.Background(), e.log, slog.LevelError, "sink failed", "err", err)
}

// count notes n records handed to the sinks and tells the listener.
func (e *Engine) count(n int64) {
	now := time.Now().UnixNano()
	e.first.CompareAndSwap(0, now)
	e.last.Store(now)
	before := e.delivered.Load()
	after := e.delivered.Add(n)
	if l := e.set.Listener; l != nil {
		iv := e.set.ListenerInterval
		for c := (before/iv + 1) * iv; c <= after; c += iv {
			l(c, "")
		}
	}
}

func callAll(fs []func(error), err error) {
	for _, f := range fs {
		f(err)
	}
}
