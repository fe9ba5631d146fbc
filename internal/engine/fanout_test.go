package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// stuckSink blocks in Consume until released or aborted.
type stuckSink struct {
	memSink
	release chan struct{}
	aborted atomic.Bool
	abort   chan struct{}

	droppedRecords atomic.Int64
}

func newStuckSink() *stuckSink {
	return &stuckSink{release: make(chan struct{}), abort: make(chan struct{})}
}

func (s *stuckSink) Consume(ctx context.Context, b *record.Batch) error {
	select {
	case <-s.release:
	case <-s.abort:
		return nil
	}
	return s.memSink.Consume(ctx, b)
}

// Dropped counts what the engine dropped for the sink (pipeline.Dropper).
func (s *stuckSink) Dropped(b *record.Batch) { s.droppedRecords.Add(int64(b.Len())) }

func (s *stuckSink) Abort() {
	if s.aborted.CompareAndSwap(false, true) {
		close(s.abort)
	}
}

// TestBestEffortSinkNeverStallsTheOthers: a best-effort sink that stops
// consuming loses its oldest batches (counted) while the durable sink gets
// every record and acknowledgements go on; at shutdown the stuck sink is
// aborted and Run returns.
func TestBestEffortSinkNeverStallsTheOthers(t *testing.T) {
	reg := metrics.New()
	br := New(Settings{QueueBatches: 4, Metrics: reg, FlushInterval: 10 * time.Millisecond})
	durable := &memSink{}
	stuck := newStuckSink()
	br.AddSink("log", durable)
	br.AddSink("live", stuck, SinkOptions{Policy: pipeline.BestEffort, QueueBatches: 2})
	const batches, size = 200, 10
	var acks atomic.Int64
	br.AddSource("gen", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		var b record.Batch
		for i := range batches {
			b.Reset()
			for j := range size {
				b.Add(typ, -1).Values[2] = record.IntValue(int64(i*size + j))
			}
			b.Done = append(b.Done, func(err error) {
				if err == nil {
					acks.Add(1)
				}
			})
			if err := out.Consume(ctx, &b); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for acks.Load() < batches && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}))
	start := time.Now()
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Run took %v with a stuck best-effort sink", d)
	}
	if n := durable.count(); n != batches*size {
		t.Fatalf("durable sink got %d records of %d", n, batches*size)
	}
	if a := acks.Load(); a != batches {
		t.Fatalf("%d of %d batches acknowledged", a, batches)
	}
	if !stuck.aborted.Load() || stuck.closes.Load() != 1 {
		t.Fatalf("stuck sink aborted %v, closed %d times", stuck.aborted.Load(), stuck.closes.Load())
	}
	dropped := testutil.ToFloat64(reg.Sink("live").OverflowCounter())
	if dropped < float64((batches-2-1)*size) {
		t.Fatalf("best-effort sink dropped %v records, want at least %d", dropped, (batches-3)*size)
	}
	if n := stuck.droppedRecords.Load(); float64(n) != dropped {
		t.Fatalf("the sink was told of %d dropped records, the counter says %v", n, dropped)
	}
}

// TestDurableAckWaitsForEveryDurableSink: a batch is acknowledged only
// once both durable sinks have it.
func TestDurableAckWaitsForEveryDurableSink(t *testing.T) {
	br := New(Settings{FlushInterval: 10 * time.Millisecond})
	fast := &memSink{}
	slow := newStuckSink()
	br.AddSink("fast", fast)
	br.AddSink("slow", slow)
	acked := make(chan struct{})
	br.AddSource("broker", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		var b record.Batch
		b.Add(typ, -1)
		b.Done = append(b.Done, func(error) { close(acked) })
		if err := out.Consume(ctx, &b); err != nil {
			return err
		}
		select {
		case <-acked:
			t.Error("acknowledged before the slow durable sink consumed")
		case <-time.After(300 * time.Millisecond):
		}
		if fast.count() != 1 {
			t.Errorf("fast sink has %d records", fast.count())
		}
		close(slow.release)
		select {
		case <-acked:
		case <-time.After(5 * time.Second):
			t.Error("never acknowledged")
		}
		return nil
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestOriginReachesTheSinks: the receiver's name is filled in, what the
// source said is kept.
func TestOriginReachesTheSinks(t *testing.T) {
	br := New(Settings{})
	got := make(chan record.Origin, 2)
	br.AddSink("s", &originSink{got: got})
	br.AddSource("kieker", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		var b record.Batch
		b.Add(typ, -1)
		b.Origin = record.Origin{Peer: "10.0.0.7:5000", Host: "node7"}
		return out.Consume(ctx, &b)
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := <-got; o != (record.Origin{Receiver: "kieker", Peer: "10.0.0.7:5000", Host: "node7"}) {
		t.Fatalf("origin %+v", o)
	}
}

type originSink struct {
	memSink
	got chan record.Origin
}

func (s *originSink) Consume(_ context.Context, b *record.Batch) error {
	s.got <- b.Origin
	return nil
}

// TestStopAndStartSources: a receiver stopped while the engine runs drains
// and stops without ending the engine; started again it delivers; the
// engine ends on cancel.
func TestStopAndStartSources(t *testing.T) {
	br := New(Settings{FlushInterval: 10 * time.Millisecond})
	sink := &memSink{}
	br.AddSink("mem", sink)
	gen := func(from int) pipeline.SourceFunc {
		return func(ctx context.Context, out pipeline.Consumer) error {
			if err := emit(ctx, out, from, 5, 5); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		}
	}
	br.AddSource("a", gen(0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- br.Run(ctx) }()
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for sink.count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("sink has %d records, want %d", sink.count(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(5)
	if err := br.StopSource("a"); err != nil {
		t.Fatal(err)
	}
	if st := br.Sources(); len(st) != 1 || st[0].State != Stopped {
		t.Fatalf("%+v", st)
	}
	select {
	case err := <-done:
		t.Fatalf("the engine ended when its only receiver was stopped: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := br.StartSource("a", gen(5)); err != nil {
		t.Fatal(err)
	}
	waitFor(10)
	if err := br.StartSource("a", gen(10)); err == nil {
		t.Fatal("started a running receiver twice")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
