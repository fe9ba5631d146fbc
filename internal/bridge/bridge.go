// Package bridge is tracebridge's core, the role of the Kieker Data Bridge's
// ServiceContainer: it runs sources (receivers), passes what they decode
// through stages to sinks, reports progress, and shuts down without losing
// what was received. A Go program can embed it: build sources, stages and
// sinks from code, Run, observe progress through a listener, cancel to stop.
//
// Goroutines: Run starts one goroutine per source (which starts its own per
// connection), one drain goroutine that owns the stages and calls the sinks
// in order, and one flusher that flushes the sinks periodically. Sinks must
// therefore allow Flush concurrently with Consume (the sinks in
// internal/sink do).
//
// Delivery: a source that must know when its records are safe (a broker
// source acknowledging messages) attaches callbacks to a batch
// (record.Batch.Done). They are called after every sink has consumed the
// batch and a following flush succeeded, about one AckInterval later, or at
// once with the error when a sink failed; with a negative FlushInterval
// they wait for Close.
//
// Shutdown: when Run's context is cancelled, sources stop accepting and
// drain what their peers already sent; once every source has returned, the
// queue is drained into the sinks, which are flushed and closed. If that
// takes longer than Settings.ShutdownTimeout the queue is aborted.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Source is a receiver. Run hands decoded batches to out until ctx is
// cancelled or the source ends by itself (a single-connection server whose
// connection closed); it returns nil then. After ctx is cancelled a source
// still hands on what its peers already sent (using a context that is not
// cancelled), then returns. An error from Run ends the whole bridge.
type Source interface {
	Run(ctx context.Context, out pipeline.Consumer) error
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, out pipeline.Consumer) error

// Run calls f.
func (f SourceFunc) Run(ctx context.Context, out pipeline.Consumer) error { return f(ctx, out) }

// Stage wraps the next consumer (trace splitting, filters, …). The
// consumer it returns runs on the bridge's drain goroutine only. If it has
// a Flush(ctx) error method, the bridge calls it between batches every
// 100 ms (to hand on records held while input pauses); if it has a
// Finish(ctx) error method, the bridge calls it once after the last batch,
// before the sinks are closed; if it has a Held() int method (records held
// back, in input order), sources' Done callbacks wait until the stage has
// handed their records on.
type Stage func(next pipeline.Consumer) pipeline.Consumer

type stageFlusher interface {
	Flush(ctx context.Context) error
}

type stageFinisher interface {
	Finish(ctx context.Context) error
}

// stageHolder is a stage that may hold records back (in input order): the
// Done callbacks of a batch wait until none of its records is held.
type stageHolder interface {
	Held() int
}

// heldTracker releases batches' Done callbacks once the stages have handed
// every record of the batch on. Stages keep input order, so with in
// records consumed so far and h held, the first in-h have been handed on.
// It runs on the drain goroutine.
type heldTracker struct {
	holders []stageHolder
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

// Listener hears about progress: count is the number of records handed to
// the sinks so far; message is empty for periodic updates.
type Listener func(count int64, message string)

// Settings configure a Bridge. Zero values mean the defaults.
type Settings struct {
	Logger  *slog.Logger
	Metrics *metrics.Registry

	// QueueBatches bounds the batches waiting between sources and sinks
	// (default 64). With the sources' batch sizes it bounds memory.
	QueueBatches int
	// FlushInterval is how often sinks are flushed (default 1 s); after
	// a kill -9, records handed to the sinks before the last flush are
	// readable. Negative: only at shutdown.
	FlushInterval time.Duration
	// ShutdownTimeout bounds draining after cancellation (default 30 s).
	ShutdownTimeout time.Duration
	// AckInterval: while sources wait for Done callbacks (brokers waiting
	// to acknowledge), sinks are flushed this often instead (default
	// 20 ms), so a broker's window of unacknowledged messages keeps moving.
	AckInterval time.Duration

	// Listener is called every ListenerInterval records (default 100, as
	// KDB's ServiceContainer does).
	Listener         Listener
	ListenerInterval int64
}

type namedSource struct {
	name string
	src  Source
}

type namedSink struct {
	name    string
	sink    pipeline.Sink
	metrics *metrics.Sink
}

// Bridge runs sources, stages and sinks. Add them before Run.
type Bridge struct {
	set     Settings
	log     *slog.Logger
	sources []namedSource
	stages  []Stage
	sinks   []namedSink

	delivered atomic.Int64
	started   atomic.Int64 // unix nanos
	stopped   atomic.Int64
	first     atomic.Int64 // unix nanos: the first records reached the sinks
	last      atomic.Int64 // unix nanos: the last records were delivered

	sinkErrs lograte.Limiter // sink failures: sinkErrsPerSecond lines a second

	pmu     sync.Mutex
	pending []func(error) // Done callbacks waiting for the next flush
}

// New returns an empty bridge.
func New(s Settings) *Bridge {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.QueueBatches <= 0 {
		s.QueueBatches = 64
	}
	if s.FlushInterval == 0 {
		s.FlushInterval = time.Second
	}
	if s.ShutdownTimeout <= 0 {
		s.ShutdownTimeout = 30 * time.Second
	}
	if s.ListenerInterval <= 0 {
		s.ListenerInterval = 100
	}
	if s.AckInterval <= 0 {
		s.AckInterval = 20 * time.Millisecond
	}
	return &Bridge{set: s, log: s.Logger, sinkErrs: lograte.Limiter{PerSecond: sinkErrsPerSecond}}
}

// SetListenerUpdateInterval sets how many records pass between listener
// calls (KDB's setListenerUpdateInterval). Call before Run.
func (b *Bridge) SetListenerUpdateInterval(n int64) {
	if n > 0 {
		b.set.ListenerInterval = n
	}
}

// AddSource adds a receiver under a name (used in logs and metrics).
func (b *Bridge) AddSource(name string, s Source) {
	b.sources = append(b.sources, namedSource{name, s})
}

// AddStage adds a stage; stages run in the order added, before the sinks.
func (b *Bridge) AddStage(s Stage) { b.stages = append(b.stages, s) }

// AddSink adds a sink; every batch goes to every sink, in the order added.
func (b *Bridge) AddSink(name string, s pipeline.Sink) {
	b.sinks = append(b.sinks, namedSink{name: name, sink: s, metrics: b.set.Metrics.Sink(name)})
}

// Stats describe a run.
type Stats struct {
	Records int64         // handed to the sinks
	Elapsed time.Duration // from Run's start to its end (or now)
	// Active is the time from the first batch reaching the sinks to the
	// last one delivered: the run without its idle start and end.
	Active time.Duration
}

// NanosPerRecord returns the active time per record (0 without records).
func (s Stats) NanosPerRecord() float64 {
	if s.Records == 0 {
		return 0
	}
	return float64(s.Active.Nanoseconds()) / float64(s.Records)
}

// RecordsPerSecond returns the throughput over the active time.
func (s Stats) RecordsPerSecond() float64 {
	if s.Active <= 0 {
		return 0
	}
	return float64(s.Records) / s.Active.Seconds()
}

// Stats returns the counts so far.
func (b *Bridge) Stats() Stats {
	start := b.started.Load()
	if start == 0 {
		return Stats{}
	}
	end := b.stopped.Load()
	if end == 0 {
		end = time.Now().UnixNano()
	}
	st := Stats{Records: b.delivered.Load(), Elapsed: time.Duration(end - start)}
	if first, last := b.first.Load(), b.last.Load(); first != 0 && last > first {
		st.Active = time.Duration(last - first)
	}
	return st
}

// Run runs the bridge until ctx is cancelled, every source has ended by
// itself, or a source fails. It returns the first source error, joined with
// sink flush/close errors. Sinks are closed when Run returns.
func (b *Bridge) Run(ctx context.Context) error {
	if len(b.sources) == 0 {
		return errors.New("bridge: no sources")
	}
	if len(b.sinks) == 0 {
		return errors.New("bridge: no sinks")
	}
	b.started.Store(time.Now().UnixNano())
	defer func() { b.stopped.Store(time.Now().UnixNano()) }()

	var chain pipeline.Consumer = pipeline.ConsumerFunc(b.deliver)
	built := make([]pipeline.Consumer, len(b.stages))
	for i := len(b.stages) - 1; i >= 0; i-- {
		chain = b.stages[i](chain)
		built[i] = chain
	}
	// Sources' Done callbacks are taken off before the stages see the
	// batch and settled once the sinks have the records durably.
	var holders []stageHolder
	for _, st := range built {
		if h, ok := st.(stageHolder); ok {
			holders = append(holders, h)
		}
	}
	track := &heldTracker{holders: holders}
	settling := pipeline.ConsumerFunc(func(ctx context.Context, batch *record.Batch) error {
		done := batch.TakeDone()
		n := batch.Len()
		err := chain.Consume(ctx, batch)
		if err != nil {
			callAll(done, err)
		} else {
			track.add(done, n)
		}
		b.settle(track.released(), nil)
		return err
	})
	q := pipeline.NewQueue(b.set.QueueBatches, settling, b.sinkError)
	b.set.Metrics.SetQueueDepth(q.Depth)
	q.OnTick(stageTick, func(ctx context.Context) {
		for _, st := range built {
			if f, ok := st.(stageFlusher); ok {
				if err := f.Flush(ctx); err != nil {
					b.sinkError(err)
				}
			}
		}
		b.settle(track.released(), nil)
	})

	drainCtx := context.WithoutCancel(ctx)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		q.Run(drainCtx)
		// Stages hand on what they still hold, first stage first, on the
		// goroutine that owns them.
		for _, st := range built {
			if f, ok := st.(stageFinisher); ok {
				if err := f.Finish(drainCtx); err != nil {
					b.sinkError(err)
				}
			}
		}
		b.settle(track.released(), nil)
	}()

	stopFlush := make(chan struct{})
	flushDone := make(chan struct{})
	go b.flusher(stopFlush, flushDone)

	srcCtx, cancelSources := context.WithCancel(ctx)
	defer cancelSources()
	var aborted atomic.Bool
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	for _, s := range b.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.src.Run(srcCtx, q)
			if errors.Is(err, pipeline.ErrClosed) && aborted.Load() {
				err = nil // the shutdown timeout aborted the queue; logged there
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				errMu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("receiver %s: %w", s.name, err)
				}
				errMu.Unlock()
				cancelSources() // one failing receiver ends the bridge
			}
		}()
	}
	sourcesDone := make(chan struct{})
	go func() { wg.Wait(); close(sourcesDone) }()

	// Wait for the sources to end, bounding the drain once shutdown began.
	select {
	case <-sourcesDone:
	case <-srcCtx.Done():
		select {
		case <-sourcesDone:
		case <-time.After(b.set.ShutdownTimeout):
			b.log.Error("shutdown timeout: receivers did not finish draining; aborting", "timeout", b.set.ShutdownTimeout)
			aborted.Store(true)
			q.Abort()
			<-sourcesDone
		}
	}
	q.Close()
	select {
	case <-drained:
	case <-time.After(b.set.ShutdownTimeout):
		b.log.Error("shutdown timeout: sinks did not drain the queue; aborting", "timeout", b.set.ShutdownTimeout, "queued_batches", q.Depth())
		q.Abort()
		select {
		case <-drained:
		case <-time.After(time.Second):
			// A sink is stuck inside Consume: its goroutine cannot be
			// stopped, and closing the sinks under it is not safe.
			close(stopFlush)
			<-flushDone
			return errors.Join(firstErr, errors.New("bridge: a sink is stuck; records still queued were lost"))
		}
	}
	close(stopFlush)
	<-flushDone

	var closeErrs []error
	pending := b.takePending()
	for _, s := range b.sinks {
		if err := s.sink.Close(); err != nil {
			closeErrs = append(closeErrs, fmt.Errorf("sink %s: %w", s.name, err))
		}
	}
	callAll(pending, errors.Join(closeErrs...))
	if l := b.set.Listener; l != nil {
		l(b.delivered.Load(), "stopped")
	}
	return errors.Join(append([]error{firstErr}, closeErrs...)...)
}

// deliver hands one batch to every sink and notifies the listener. It runs
// on the drain goroutine.
func (b *Bridge) deliver(ctx context.Context, batch *record.Batch) error {
	n := int64(batch.Len())
	if n == 0 {
		return nil
	}
	if b.first.Load() == 0 {
		b.first.Store(time.Now().UnixNano())
	}
	var errs []error
	for _, s := range b.sinks {
		t0 := time.Now()
		err := s.sink.Consume(ctx, batch)
		s.metrics.Consumed(int(n), time.Since(t0), err)
		if err != nil {
			errs = append(errs, fmt.Errorf("sink %s: %w", s.name, err))
		}
	}
	b.last.Store(time.Now().UnixNano())
	before := b.delivered.Load()
	after := b.delivered.Add(n)
	if l := b.set.Listener; l != nil {
		iv := b.set.ListenerInterval
		for c := (before/iv + 1) * iv; c <= after; c += iv {
			l(c, "")
		}
	}
	return errors.Join(errs...)
}

// sinkErrsPerSecond is how many sink failures are logged a second.
const sinkErrsPerSecond = 5

// sinkError logs sink failures, at most sinkErrsPerSecond a second.
func (b *Bridge) sinkError(err error) {
	b.sinkErrs.Log(context.Background(), b.log, slog.LevelError, "sink failed", "err", err)
}

func (b *Bridge) flusher(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if b.set.FlushInterval < 0 {
		<-stop
		return
	}
	tick := min(b.set.FlushInterval, b.set.AckInterval)
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			b.pmu.Lock()
			waiting := len(b.pending) > 0
			b.pmu.Unlock()
			if now.Sub(last) >= b.set.FlushInterval || waiting && now.Sub(last) >= b.set.AckInterval {
				b.flushSinks()
				last = now
			}
		}
	}
}

// flushSinks flushes every sink and then settles the callbacks of the
// batches consumed before the flush began.
func (b *Bridge) flushSinks() {
	pending := b.takePending()
	var errs []error
	for _, s := range b.sinks {
		if err := s.sink.Flush(); err != nil {
			err = fmt.Errorf("sink %s: flush: %w", s.name, err)
			b.sinkError(err)
			errs = append(errs, err)
		}
	}
	callAll(pending, errors.Join(errs...))
}

// settle records the callbacks of consumed batches: failed batches hear at
// once, the others after the next successful flush.
func (b *Bridge) settle(done []func(error), err error) {
	if len(done) == 0 {
		return
	}
	if err != nil {
		callAll(done, err)
		return
	}
	b.pmu.Lock()
	b.pending = append(b.pending, done...)
	b.pmu.Unlock()
}

func (b *Bridge) takePending() []func(error) {
	b.pmu.Lock()
	defer b.pmu.Unlock()
	p := b.pending
	b.pending = nil
	return p
}

func callAll(fs []func(error), err error) {
	for _, f := range fs {
		f(err)
	}
}
