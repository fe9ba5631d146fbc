package engine

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
	"github.com/tracebridge/tracebridge/internal/trace"
)

// fanout hands every batch to every sink through a queue and a goroutine
// per sink (a runner). The drain goroutine calls Consume, Emit and settle;
// the runners consume.
//
// A batch is shared by all runners (an item counts the runners still
// holding it) and goes back to the engine's batch pool when the last one
// is done with it. Done callbacks travel as markers through the durable
// runners' queues behind the records they cover, and are called once
// every durable runner has flushed past them.
type fanout struct {
	e        *Engine
	runners  []*runner
	durable  int
	takers   int // runners that take records (not TracesOnly)
	recycle  func(*record.Batch)
	newBatch func() *record.Batch
	items    sync.Pool

	aborted   chan struct{}
	abortOnce sync.Once
	stopping  atomic.Bool // shutdown began: failed records are lost

	// traceBacklog counts the spans of the traces in the runners'
	// queues (put by traces, taken off by the runners).
	traceBacklog atomic.Int64
}

// item is a batch shared by the runners (and the assembly workers).
type item struct {
	batch *record.Batch
	refs  atomic.Int32
	f     *fanout
	// route is each record's assembly worker (sharded assembly only;
	// kept with the item for reuse).
	route []uint8
}

func (it *item) release() {
	if it.refs.Add(-1) == 0 {
		it.f.recycle(it.batch)
		it.batch = nil
		it.route = it.route[:0]
		it.f.items.Put(it)
	}
}

// newItem returns an item (from the pool) holding b.
func (f *fanout) newItem(b *record.Batch) *item {
	it, _ := f.items.Get().(*item)
	if it == nil {
		it = &item{f: f}
	}
	it.batch = b
	return it
}

// marker carries Done callbacks through the durable runners.
type marker struct {
	done    []func(error)
	pending atomic.Int32 // durable runners that have not flushed past it
	mu      sync.Mutex
	err     error
}

func (m *marker) durableDone(err error) {
	if err != nil {
		m.mu.Lock()
		if m.err == nil {
			m.err = err
		}
		m.mu.Unlock()
	}
	if m.pending.Add(-1) == 0 {
		m.mu.Lock()
		err := m.err
		m.mu.Unlock()
		callAll(m.done, err)
	}
}

// entry is one element of a runner's queue: a batch, completed traces or
// a marker.
type entry struct {
	it    *item
	tr    []*trace.Trace
	spans int64 // tr's spans
	mk    *marker
}

// records returns the number of records of en's batch (0 without one).
func (en entry) records() int64 {
	if en.it == nil {
		return 0
	}
	return int64(en.it.batch.Len())
}

// maxQueuedSpans bounds the spans of the completed traces waiting in one
// sink's queue (about 35 MiB of spans), besides queue_batches: the parts
// of a huge trace (100,000 spans each) would otherwise fill a queue of 64
// with gigabytes when the sink is slower than the assembler. A single
// entry larger than the bound is queued when the queue holds no traces.
const maxQueuedSpans = 1 << 17

func newFanout(e *Engine) *fanout {
	f := &fanout{e: e, aborted: make(chan struct{})}
	for _, s := range e.sinks {
		r := &runner{
			e:      e,
			fan:    f,
			name:   s.name,
			sink:   s.sink,
			policy: s.opts.Policy,
			ch:     make(chan entry, s.opts.QueueBatches),
			met:    s.met,
			done:   make(chan struct{}),
			drops:  lograte.Limiter{PerSecond: 1},

			consumeFaults: lograte.Outage{Settle: faultSettle},
			flushFaults:   lograte.Outage{Settle: faultSettle},
		}
		r.tc, _ = s.sink.(pipeline.TraceConsumer)
		if pc, ok := s.sink.(pipeline.PackedTraceConsumer); ok && pc.PackedTraces() {
			r.packed = true
		}
		if to, ok := s.sink.(pipeline.TracesOnly); ok && to.TracesOnly() {
			r.tracesOnly = true
		} else {
			f.takers++
		}
		if bl, ok := s.sink.(pipeline.Backlogger); ok {
			ch := r.ch
			bl.SetBacklog(func() int { return len(ch) })
		}
		if r.policy == pipeline.Durable {
			f.durable++
		}
		f.runners = append(f.runners, r)
	}
	f.recycle = func(*record.Batch) {}
	f.newBatch = func() *record.Batch { return &record.Batch{} }
	return f
}

func (f *fanout) start(ctx context.Context) {
	for _, r := range f.runners {
		go r.run(ctx)
	}
}

// Consume copies b (the caller keeps it) and hands the copy to every sink.
func (f *fanout) Consume(ctx context.Context, b *record.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	c := f.newBatch()
	c.Copy(b)
	c.Origin = b.Origin
	return f.dispatch(ctx, c)
}

// Emit takes b and hands it to every sink; it returns an empty batch.
func (f *fanout) Emit(ctx context.Context, b *record.Batch) (*record.Batch, error) {
	if b.Len() == 0 {
		return b, nil
	}
	err := f.dispatch(ctx, b)
	return f.newBatch(), err
}

func (f *fanout) dispatch(ctx context.Context, b *record.Batch) error {
	return f.share(ctx, f.newItem(b), 0)
}

// share hands the item's batch to every sink that takes records and keeps
// extra references for the caller to release (the assembly workers that
// read the batch too); with none left the batch is recycled at once.
func (f *fanout) share(ctx context.Context, it *item, extra int) error {
	n := it.batch.Len()
	for _, r := range f.runners {
		if r.tracesOnly {
			r.met.Passed(n)
		}
	}
	f.e.count(int64(n))
	it.refs.Store(int32(f.takers + extra))
	if f.takers+extra == 0 {
		it.refs.Store(1)
		it.release()
		return nil
	}
	if f.takers == 0 {
		return nil
	}
	var errs []error
	for _, r := range f.runners {
		if r.tracesOnly {
			continue
		}
		if err := r.put(ctx, entry{it: it}, f.aborted); err != nil {
			it.release()
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// traces hands completed traces to every sink that takes traces of their
// sources.
func (f *fanout) traces(ctx context.Context, ts []*trace.Trace) {
	// A packed trace that a sink reading Spans takes is unpacked here,
	// before any sink has it (the others read it unpacked too).
	for _, r := range f.runners {
		if r.tc == nil || r.packed {
			continue
		}
		want := r.tc.TraceSources()
		for _, t := range ts {
			if t.Packed != nil && want.Has(t.Source()) {
				t.Unpack()
			}
		}
	}
	for _, r := range f.runners {
		if r.tc == nil {
			continue
		}
		want := r.tc.TraceSources()
		var mine []*trace.Trace
		for _, t := range ts {
			if t.SpanCount() == 0 || want.Has(t.Source()) {
				mine = append(mine, t)
			}
		}
		if len(mine) > 0 {
			en := entry{tr: mine, spans: spansOf(mine)}
			f.traceBacklog.Add(en.spans)
			if err := r.put(ctx, en, f.aborted); err != nil {
				f.traceBacklog.Add(-en.spans)
			}
		}
	}
}

// settle sends done callbacks behind the records handed on so far: they
// are called once every durable sink has flushed those records (at once
// when there is no durable sink), or at once with err.
func (f *fanout) settle(ctx context.Context, done []func(error), err error) {
	if len(done) == 0 {
		return
	}
	if err != nil || f.durable == 0 {
		callAll(done, err)
		return
	}
	mk := &marker{done: done}
	mk.pending.Store(int32(f.durable))
	for _, r := range f.runners {
		if r.policy != pipeline.Durable {
			continue
		}
		if err := r.put(ctx, entry{mk: mk}, f.aborted); err != nil {
			mk.durableDone(err)
		}
	}
}

// abort unblocks a dispatch waiting for a full durable queue.
func (f *fanout) abort() { f.abortOnce.Do(func() { close(f.aborted) }) }

// shutdownNotice is how long shutdown waits for the sinks before it says
// which durable sinks it still waits for (at most a quarter of the
// shutdown timeout): one that delivers its queue at once is not worth a
// line.
const shutdownNotice = time.Second

// shutdownWait bounds shutdown's waits and, shutdownNotice after shutdown
// began, says once which durable sinks still have records to deliver. It
// is used on Run's goroutine only.
type shutdownWait struct {
	fan    *fanout
	bound  time.Time // when shutdown gives up on the sinks at the latest
	notice *time.Timer
	noted  bool
}

func newShutdownWait(f *fanout, bound time.Time, timeout time.Duration) *shutdownWait {
	return &shutdownWait{fan: f, bound: bound, notice: time.NewTimer(min(shutdownNotice, timeout/4))}
}

// until waits for done until the time until and reports whether done was
// closed.
func (w *shutdownWait) until(done <-chan struct{}, until time.Time) bool {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	for {
		var notice <-chan time.Time
		if !w.noted {
			notice = w.notice.C
		}
		select {
		case <-done:
			return true
		case <-t.C:
			return false
		case <-notice:
			w.noted = true
			w.fan.noteWaiting(w.bound)
		}
	}
}

// noteWaiting logs each durable sink that still has records to deliver.
func (f *fanout) noteWaiting(bound time.Time) {
	for _, r := range f.runners {
		n := r.pending.Load()
		if r.policy != pipeline.Durable || n <= 0 {
			continue
		}
		select {
		case <-r.done:
			continue
		default:
		}
		args := []any{"sink", r.name, "records", n, "up_to", time.Until(bound).Round(time.Second).String()}
		if h := f.e.set.ShutdownHint; h != "" {
			args = append(args, "hint", h)
		}
		f.e.log.Warn("shutdown: waiting for a sink to deliver its records", args...)
	}
}

// stop ends the runners once the drain goroutine is done: each drains its
// queue, flushes and is closed. Durable sinks may take until w's bound,
// best-effort sinks BestEffortGrace; then a sink that can be aborted is.
// A sink still stuck is left alone (closing it under its own goroutine is
// not safe) and reported. The records a sink failed to take since
// shutdown began (an aborted sink's among them) are logged once.
func (f *fanout) stop(w *shutdownWait) []error {
	for _, r := range f.runners {
		close(r.ch)
	}
	var errs []error
	for _, r := range f.runners {
		until := w.bound
		if grace := time.Now().Add(BestEffortGrace); r.policy == pipeline.BestEffort && grace.Before(until) {
			until = grace
		}
		if !w.until(r.done, until) {
			r.aborted.Store(true)
			if a, ok := r.sink.(pipeline.Aborter); ok {
				a.Abort()
			}
			if !r.wait(time.Now().Add(time.Second)) {
				err := fmt.Errorf("sink %s: still busy at shutdown; %d records not delivered", r.name, r.pending.Load()+r.lost.Load())
				f.e.log.Error("sink stuck at shutdown", "sink", r.name, "err", err)
				errs = append(errs, err)
				continue
			}
		}
		if n := r.lost.Load(); n > 0 {
			f.e.log.Error("shutdown: records not delivered; they are lost", "sink", r.name, "records", n, "err", r.lostErr)
		}
		if err := r.sink.Close(); err != nil {
			errs = append(errs, fmt.Errorf("sink %s: %w", r.name, err))
		}
	}
	return errs
}

// runner owns one sink: its queue, the goroutine that calls its Consume,
// and the goroutine that flushes it periodically (sinks allow Flush
// concurrently with Consume, as the pipeline contract says).
type runner struct {
	e   *Engine
	fan *fanout
	// tracesOnly: the sink takes no records (pipeline.TracesOnly).
	tracesOnly bool
	name       string
	sink       pipeline.Sink
	tc         pipeline.TraceConsumer // the sink, if it takes traces
	packed     bool                   // it reads packed traces (pipeline.PackedTraceConsumer)
	policy     pipeline.Policy
	ch         chan entry
	met        *metrics.Sink
	done       chan struct{} // closed when both goroutines have returned
	drops      lograte.Limiter
	// A sink that fails (its server away, a full disk) usually fails
	// every call until it recovers: its Consume and Flush failures are
	// logged once when they start and once when they end, after
	// faultSettle of successes (the metrics count each).
	consumeFaults, flushFaults lograte.Outage

	failed  error // a Consume failed since the last marker; consuming goroutine only
	dropped atomic.Int64
	// pending counts the records put in ch and not yet taken: queued, or
	// in a Consume that has not returned.
	pending atomic.Int64
	// lost counts the records whose Consume failed since shutdown began;
	// lostErr (consuming goroutine; read once done is closed) is the
	// first failure's error.
	lost    atomic.Int64
	lostErr error
	aborted atomic.Bool // shutdown aborted the sink: its failures are not logged one by one

	pmu     sync.Mutex
	waiting []*marker // markers consumed since the last flush began

	// spans counts the spans of the traces in ch (maxQueuedSpans);
	// taken, made by the first who waits for room, is closed when the
	// sink has taken traces from ch (several goroutines put traces: the
	// assembly workers).
	spans atomic.Int64
	tmu   sync.Mutex
	taken chan struct{}
}

// takenChan returns the channel closed at the sink's next take of traces.
func (r *runner) takenChan() <-chan struct{} {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	if r.taken == nil {
		r.taken = make(chan struct{})
	}
	return r.taken
}

// put enqueues en. A durable runner waits while its queue is full; a
// best-effort runner drops its oldest batch instead.
func (r *runner) put(ctx context.Context, en entry, aborted <-chan struct{}) error {
	if en.spans > 0 {
		room := func() bool { q := r.spans.Load(); return q == 0 || q+en.spans <= maxQueuedSpans }
		for !room() {
			if r.policy != pipeline.Durable {
				r.fan.traceBacklog.Add(-en.spans)
				r.dropTraces(en)
				return nil
			}
			// The channel, then the count again: a take in between
			// closes the channel taken here.
			taken := r.takenChan()
			if room() {
				break
			}
			select {
			case <-taken:
			case <-aborted:
				return pipeline.ErrClosed
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		r.spans.Add(en.spans)
	}
	n := en.records()
	r.pending.Add(n)
	if r.policy == pipeline.Durable {
		select {
		case r.ch <- en:
			return nil
		case <-aborted:
			r.spans.Add(-en.spans)
			r.pending.Add(-n)
			return pipeline.ErrClosed
		case <-ctx.Done():
			r.spans.Add(-en.spans)
			r.pending.Add(-n)
			return ctx.Err()
		}
	}
	for {
		select {
		case r.ch <- en:
			return nil
		default:
		}
		select {
		case old := <-r.ch:
			r.overflow(old)
		default:
		}
	}
}

// dropTraces logs the completed traces of en dropped.
func (r *runner) dropTraces(en entry) {
	r.drops.Log(context.Background(), r.e.log, slog.LevelWarn, "best-effort sink is behind; completed traces were dropped",
		"sink", r.name, "traces", len(en.tr))
}

// overflow drops a batch a best-effort runner had no room for.
func (r *runner) overflow(old entry) {
	if old.tr != nil {
		r.spans.Add(-old.spans)
		r.fan.traceBacklog.Add(-old.spans)
		r.dropTraces(old)
		return
	}
	if old.it == nil {
		return
	}
	n := old.it.batch.Len()
	r.pending.Add(-int64(n))
	if d, ok := r.sink.(pipeline.Dropper); ok {
		d.Dropped(old.it.batch)
	}
	total := r.dropped.Add(int64(n))
	r.met.Overflow(n)
	r.drops.Log(context.Background(), r.e.log, slog.LevelWarn, "best-effort sink is behind; its oldest batch was dropped",
		"sink", r.name, "records", n, "dropped_total", total)
	old.it.release()
}

func (r *runner) wait(until time.Time) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(time.Until(until)):
		return false
	}
}

// run consumes the queue until it is closed, then stops the flusher, which
// flushes a last time.
func (r *runner) run(ctx context.Context) {
	defer close(r.done)
	stop, flushed := make(chan struct{}), make(chan struct{})
	go r.flusher(stop, flushed)
	for en := range r.ch {
		r.handle(ctx, en)
		r.met.Queued(len(r.ch))
	}
	close(stop)
	<-flushed
}

func (r *runner) handle(ctx context.Context, en entry) {
	if it := en.it; it != nil {
		n := it.batch.Len()
		t0 := time.Now()
		err := r.sink.Consume(ctx, it.batch)
		r.met.Consumed(n, time.Since(t0), err)
		if err != nil {
			err = fmt.Errorf("sink %s: %w", r.name, err)
			if r.fan.stopping.Load() {
				if r.lostErr == nil {
					r.lostErr = err
				}
				r.lost.Add(int64(n))
			}
			if !r.aborted.Load() {
				r.consumeFailed(err)
			}
			if r.failed == nil {
				r.failed = err
			}
		} else {
			r.consumeWorks()
		}
		r.pending.Add(-int64(n))
		it.release()
	}
	if en.tr != nil {
		defer r.fan.traceBacklog.Add(-en.spans)
		if err := r.tc.ConsumeTraces(ctx, en.tr); err != nil {
			err = fmt.Errorf("sink %s: traces: %w", r.name, err)
			r.consumeFailed(err)
			if r.failed == nil {
				r.failed = err
			}
		} else {
			r.consumeWorks()
			r.met.Traces(len(en.tr), int(en.spans))
		}
		r.spans.Add(-en.spans)
		r.tmu.Lock()
		if r.taken != nil {
			close(r.taken)
			r.taken = nil
		}
		r.tmu.Unlock()
	}
	if mk := en.mk; mk != nil {
		if r.failed != nil {
			mk.durableDone(r.failed)
			r.failed = nil
			return
		}
		r.pmu.Lock()
		r.waiting = append(r.waiting, mk)
		r.pmu.Unlock()
	}
}

// flusher flushes every FlushInterval, or every AckInterval while markers
// wait, and once more when stop is closed.
func (r *runner) flusher(stop <-chan struct{}, flushed chan<- struct{}) {
	defer close(flushed)
	set := r.e.set
	var tick <-chan time.Time
	if set.FlushInterval > 0 {
		t := time.NewTicker(min(set.FlushInterval, set.AckInterval))
		defer t.Stop()
		tick = t.C
	}
	last := time.Now()
	for {
		select {
		case <-stop:
			r.flush()
			return
		case now := <-tick:
			r.pmu.Lock()
			waiting := len(r.waiting) > 0
			r.pmu.Unlock()
			if now.Sub(last) >= set.FlushInterval || waiting && now.Sub(last) >= set.AckInterval {
				r.flush()
				last = now
			}
		}
	}
}

// flush flushes the sink and settles the markers consumed before it began.
func (r *runner) flush() {
	r.pmu.Lock()
	waiting := r.waiting
	r.waiting = nil
	r.pmu.Unlock()
	err := r.sink.Flush()
	if err != nil {
		err = fmt.Errorf("sink %s: flush: %w", r.name, err)
		if r.flushFaults.Fail() {
			r.e.log.Error("sink failed", "sink", r.name, "op", "flush", "err", err)
		}
	} else if n := r.flushFaults.Recover(); n > 0 {
		r.e.log.Info("sink works again", "sink", r.name, "op", "flush", "failures", n)
	}
	for _, mk := range waiting {
		mk.durableDone(err)
	}
}

// consumeFailed notes a failed Consume or ConsumeTraces: logged when the
// sink's consume failures start.
func (r *runner) consumeFailed(err error) {
	if r.consumeFaults.Fail() {
		r.e.log.Error("sink failed", "sink", r.name, "op", "consume", "err", err)
	}
}

// consumeWorks notes a Consume or ConsumeTraces that succeeded: the end
// of the sink's consume failures, if it had them, is logged.
func (r *runner) consumeWorks() {
	if n := r.consumeFaults.Recover(); n > 0 {
		r.e.log.Info("sink works again", "sink", r.name, "op", "consume", "failures", n)
	}
}

// spansOf returns the spans of traces ts.
func spansOf(ts []*trace.Trace) int64 {
	var n int64
	for _, t := range ts {
		n += int64(t.SpanCount())
	}
	return n
}
