package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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

// TestQueueMaxBytes: with SetMaxBytes, producers wait while the queued
// batches hold the bound (a batch larger than it goes into an empty
// queue), although the queue has room for more batches; each batch the
// consumer takes lets the next one in, and every record arrives once, in
// order. Without the bound the same batches all queue.
func TestQueueMaxBytes(t *testing.T) {
	size := int64(batchOf(0, 10).Bytes())
	if size <= 0 {
		t.Fatalf("a batch of 10 records holds %d bytes", size)
	}
	for _, tt := range []struct {
		name   string
		max    int64
		queued int // batches queued before the consumer takes any
	}{
		{"two batches", 2 * size, 2},
		{"less than one", size / 2, 1},
		{"no bound", 0, 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			var mu sync.Mutex
			var got []int64
			q := NewQueue(8, ConsumerFunc(func(_ context.Context, b *record.Batch) error {
				<-release
				mu.Lock()
				defer mu.Unlock()
				for _, r := range b.Records {
					got = append(got, r.Values[2].Int())
				}
				return nil
			}), nil)
			q.SetMaxBytes(tt.max)
			ctx := context.Background()
			sent := make(chan int, 6)
			go func() {
				for i := range 6 {
					if _, err := q.Emit(ctx, batchOf(10*i, 10)); err != nil {
						t.Error(err)
					}
					sent <- i
				}
				close(sent)
			}()
			// Nobody runs the queue yet: exactly tt.queued batches get in.
			for range tt.queued {
				<-sent
			}
			if tt.queued < 6 {
				select {
				case i := <-sent:
					t.Fatalf("batch %d queued beyond %d bytes (%d a batch)", i, tt.max, size)
				case <-time.After(100 * time.Millisecond):
				}
			}
			done := make(chan struct{})
			go func() { q.Run(ctx); close(done) }()
			close(release)
			for range sent {
			}
			q.Close()
			<-done
			if len(got) != 60 {
				t.Fatalf("%d records consumed, want 60", len(got))
			}
			for i, v := range got {
				if v != int64(i) {
					t.Fatalf("record %d is %d: out of order", i, v)
				}
			}
			if h := q.held.Load(); h != 0 {
				t.Fatalf("%d bytes still counted after the queue drained", h)
			}
		})
	}
}
