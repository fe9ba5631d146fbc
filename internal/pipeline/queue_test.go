package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var typ = record.Builtin().Lookup(record.SplitEvent)

func batchOf(from, n int) *record.Batch {
	b := &record.Batch{}
	for i := from; i < from+n; i++ {
		b.Add(typ, -1).Values[2] = record.IntValue(int64(i))
	}
	return b
}

func TestQueueEmitAndConsume(t *testing.T) {
	var mu sync.Mutex
	var got []int64
	q := NewQueue(2, ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range b.Records {
			got = append(got, r.Values[2].Int())
		}
		return nil
	}), nil)
	done := make(chan struct{})
	go func() { q.Run(context.Background()); close(done) }()

	ctx := context.Background()
	b := batchOf(0, 10)
	nb, err := q.Emit(ctx, b)
	if err != nil || nb == b || nb.Len() != 0 {
		t.Fatalf("Emit returned %p (len %d), %v; want a new empty batch", nb, nb.Len(), err)
	}
	own := batchOf(10, 5)
	if err := q.Consume(ctx, own); err != nil {
		t.Fatal(err)
	}
	own.Records[0].Values[2] = record.IntValue(-1) // the queue copied it
	if same, err := q.Emit(ctx, &record.Batch{}); err != nil || same.Len() != 0 {
		t.Fatal("empty batch")
	}
	q.Close()
	<-done
	if len(got) != 15 || got[10] != 10 {
		t.Fatalf("got %v", got)
	}
	if _, err := q.Emit(ctx, batchOf(0, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Emit after Close: %v", err)
	}
	if q.Enqueued() != 15 || q.Depth() != 0 {
		t.Fatalf("enqueued %d depth %d", q.Enqueued(), q.Depth())
	}
	q.Close()
}

func TestQueueAbortUnblocksProducers(t *testing.T) {
	q := NewQueue(1, ConsumerFunc(func(context.Context, *record.Batch) error { return nil }), nil)
	ctx := context.Background()
	if _, err := q.Emit(ctx, batchOf(0, 1)); err != nil { // fills the queue; nobody runs it
		t.Fatal(err)
	}
	errc := make(chan error)
	go func() { _, err := q.Emit(ctx, batchOf(1, 1)); errc <- err }()
	q.Abort()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Emit after Abort: %v", err)
	}
	q.Run(ctx) // returns at once
	q.Abort()
}

func TestQueueReportsConsumerErrors(t *testing.T) {
	var errs []error
	q := NewQueue(1, ConsumerFunc(func(context.Context, *record.Batch) error { return errors.New("disk full") }), func(err error) { errs = append(errs, err) })
	done := make(chan struct{})
	go func() { q.Run(context.Background()); close(done) }()
	q.Consume(context.Background(), batchOf(0, 3))
	q.Close()
	<-done
	if len(errs) != 1 {
		t.Fatalf("errors %v", errs)
	}
}
