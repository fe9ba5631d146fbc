package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var typ = record.Builtin().Lookup(record.BeforeOperationEvent)

// memSink records what it consumes.
type memSink struct {
	mu      sync.Mutex
	orders  []int64
	flushes atomic.Int64
	closes  atomic.Int64
	delay   time.Duration
	block   chan struct{}
}

func (s *memSink) Consume(_ context.Context, b *record.Batch) error {
	if s.block != nil {
		<-s.block
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Records {
		s.orders = append(s.orders, r.Values[2].Int())
	}
	return nil
}
func (s *memSink) Flush() error { s.flushes.Add(1); return nil }
func (s *memSink) Close() error { s.closes.Add(1); return nil }
func (s *memSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders)
}

// emit hands n records numbered from `from` on, in batches of size.
func emit(ctx context.Context, out pipeline.Consumer, from, n, size int) error {
	var b record.Batch
	for i := from; i < from+n; i++ {
		b.Add(typ, -1).Values[2] = record.IntValue(int64(i))
		if b.Len() == size || i == from+n-1 {
			if err := out.Consume(ctx, &b); err != nil {
				return err
			}
			b.Reset()
		}
	}
	return nil
}

func TestDeliversEverythingAndReportsProgress(t *testing.T) {
	var calls []int64
	var stopped bool
	br := New(Settings{Listener: func(c int64, msg string) {
		if msg == "stopped" {
			stopped = true
			return
		}
		calls = append(calls, c)
	}})
	br.SetListenerUpdateInterval(250)
	sink := &memSink{}
	br.AddSink("mem", sink)
	br.AddSource("gen", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		return emit(ctx, out, 0, 1050, 64)
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.count() != 1050 || sink.closes.Load() != 1 {
		t.Fatalf("sink got %d records, closed %d times", sink.count(), sink.closes.Load())
	}
	for i, o := range sink.orders {
		if o != int64(i) {
			t.Fatalf("record %d out of order (%d)", i, o)
		}
	}
	if want := []int64{250, 500, 750, 1000}; len(calls) != len(want) || calls[3] != 1000 || !stopped {
		t.Fatalf("listener calls %v (stopped %v), want %v", calls, stopped, want)
	}
	st := br.Stats()
	if st.Records != 1050 || st.Elapsed <= 0 || st.RecordsPerSecond() <= 0 || st.NanosPerRecord() <= 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStatsOverActiveTime: the rates of -s are taken over the time from
// the first records to the last, not over idle time before and after.
func TestStatsOverActiveTime(t *testing.T) {
	br := New(Settings{})
	br.AddSink("mem", &memSink{})
	br.AddSource("gen", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		time.Sleep(300 * time.Millisecond) // idle before
		if err := emit(ctx, out, 0, 1000, 100); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // and after
		return nil
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := br.Stats()
	if st.Records != 1000 || st.Active <= 0 || st.Active > st.Elapsed-500*time.Millisecond {
		t.Fatalf("stats %+v: want the active time without the 600 ms of idleness", st)
	}
	if got, want := st.RecordsPerSecond(), 1000/st.Active.Seconds(); got != want {
		t.Errorf("%v records per second, want %v (over the active time)", got, want)
	}
	if got, want := st.NanosPerRecord(), float64(st.Active.Nanoseconds())/1000; got != want {
		t.Errorf("%v ns per record, want %v", got, want)
	}
}

func TestCancelDrainsWhatWasReceived(t *testing.T) {
	br := New(Settings{})
	sink := &memSink{}
	br.AddSink("mem", sink)
	ready := make(chan struct{})
	br.AddSource("gen", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		if err := emit(ctx, out, 0, 500, 100); err != nil {
			return err
		}
		close(ready)
		<-ctx.Done()
		// Draining: what peers already sent is still handed on.
		return emit(context.WithoutCancel(ctx), out, 500, 300, 100)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-ready; cancel() }()
	if err := br.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.count() != 800 {
		t.Fatalf("sink got %d records, want 800", sink.count())
	}
}

func TestSourceErrorEndsBridge(t *testing.T) {
	br := New(Settings{})
	br.AddSink("mem", &memSink{})
	otherStopped := make(chan struct{})
	br.AddSource("bad", pipeline.SourceFunc(func(context.Context, pipeline.Consumer) error { return errors.New("bind: address in use") }))
	br.AddSource("good", pipeline.SourceFunc(func(ctx context.Context, _ pipeline.Consumer) error {
		<-ctx.Done()
		close(otherStopped)
		return nil
	}))
	err := br.Run(context.Background())
	if err == nil || err.Error() != "receiver bad: bind: address in use" {
		t.Fatalf("error %v", err)
	}
	<-otherStopped
}

func TestSlowSinkBoundsTheQueue(t *testing.T) {
	br := New(Settings{QueueBatches: 4})
	sink := &memSink{delay: 2 * time.Millisecond}
	br.AddSink("slow", sink)
	var maxLag atomic.Int64
	br.AddSource("fast", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		var b record.Batch
		for i := 0; i < 200; i++ {
			b.Reset()
			b.Add(typ, -1).Values[2] = record.IntValue(int64(i))
			if err := out.Consume(ctx, &b); err != nil {
				return err
			}
			// Records accepted but not yet consumed: bounded by the queue.
			maxLag.Store(max(maxLag.Load(), int64(i+1-sink.count())))
		}
		return nil
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 4 in the engine's queue + 1 on the drain goroutine + 4 in the
	// sink's queue + 1 being consumed + 1 in flight.
	if lag := maxLag.Load(); lag > 11 {
		t.Fatalf("source ran %d batches ahead of a slow sink with queues of 4", lag)
	}
}

func TestPeriodicFlush(t *testing.T) {
	br := New(Settings{FlushInterval: 5 * time.Millisecond})
	sink := &memSink{}
	br.AddSink("mem", sink)
	br.AddSource("idle", pipeline.SourceFunc(func(ctx context.Context, _ pipeline.Consumer) error {
		time.Sleep(60 * time.Millisecond)
		return nil
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.flushes.Load() < 3 {
		t.Fatalf("flushed %d times in 60ms with a 5ms interval", sink.flushes.Load())
	}
}

func TestShutdownTimeoutAbortsStuckSink(t *testing.T) {
	br := New(Settings{ShutdownTimeout: 50 * time.Millisecond, QueueBatches: 1})
	stuck := &memSink{block: make(chan struct{})}
	defer close(stuck.block)
	br.AddSink("stuck", stuck)
	br.AddSource("gen", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		err := emit(ctx, out, 0, 10, 1)
		if errors.Is(err, pipeline.ErrClosed) {
			return nil
		}
		return err
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	done := make(chan error)
	go func() { done <- br.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the shutdown timeout")
	}
}

// holdingStage holds every record back until release is closed.
type holdingStage struct {
	next    pipeline.Consumer
	held    record.Batch
	release chan struct{}
}

func (h *holdingStage) Consume(ctx context.Context, b *record.Batch) error {
	for i := range b.Records {
		h.held.AddRecord(&b.Records[i])
	}
	return h.Flush(ctx)
}

func (h *holdingStage) Flush(ctx context.Context) error {
	select {
	case <-h.release:
	default:
		return nil
	}
	if h.held.Len() == 0 {
		return nil
	}
	err := h.next.Consume(ctx, &h.held)
	h.held.Reset()
	return err
}

func (h *holdingStage) Held() int { return h.held.Len() }

// memTraceSink is a memSink that takes traces too (the engine then
// assembles, on several workers).
type memTraceSink struct{ memSink }

func (s *memTraceSink) TraceSources() trace.Sources                         { return trace.AllSources }
func (s *memTraceSink) ConsumeTraces(context.Context, []*trace.Trace) error { return nil }

func TestDoneWaitsForHeldRecords(t *testing.T) {
	t.Run("records", func(t *testing.T) { testDoneWaitsForHeldRecords(t, &memSink{}, 0) })
	t.Run("sharded assembly", func(t *testing.T) { testDoneWaitsForHeldRecords(t, &memTraceSink{}, 3) })
}

func testDoneWaitsForHeldRecords(t *testing.T, s pipeline.Sink, workers int) {
	br := New(Settings{FlushInterval: 10 * time.Millisecond, AssemblyWorkers: workers})
	sink, ok := s.(*memSink)
	if ts, isTS := s.(*memTraceSink); isTS {
		sink, ok = &ts.memSink, true
	}
	if !ok {
		t.Fatalf("sink %T", s)
	}
	release := make(chan struct{})
	br.AddStage(func(next pipeline.Consumer) pipeline.Consumer { return &holdingStage{next: next, release: release} })
	br.AddSink("mem", s)
	acked := make(chan int, 1)
	br.AddSource("broker", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		var b record.Batch
		b.Add(typ, -1)
		b.Done = append(b.Done, func(err error) { acked <- sink.count() })
		if err := out.Consume(ctx, &b); err != nil {
			return err
		}
		select {
		case n := <-acked:
			t.Errorf("acknowledged while the stage held the record (sink has %d)", n)
			return nil
		case <-time.After(300 * time.Millisecond):
		}
		close(release)
		select {
		case n := <-acked:
			if n != 1 {
				t.Errorf("acknowledged with %d records in the sink", n)
			}
		case <-time.After(5 * time.Second):
			t.Error("never acknowledged after the stage released the record")
		}
		return nil
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
