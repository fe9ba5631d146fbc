package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// ErrClosed is returned when handing a batch to a closed or aborted Queue.
var ErrClosed = errors.New("pipeline closed")

// Emitter is implemented by consumers that take ownership of a filled batch
// and give back an empty one, so a source hands batches on without copying.
// Sources check for it with a type assertion and fall back to Consume.
type Emitter interface {
	// Emit takes b (the caller must not touch it again) and returns an
	// empty batch for the caller to fill next. It blocks while the
	// consumer is full: that is the back-pressure that slows a source.
	Emit(ctx context.Context, b *record.Batch) (*record.Batch, error)
}

// Queue decouples many producers (connection goroutines) from one consumer
// goroutine. It holds at most Capacity batches; producers block when it is
// full, so memory stays bounded by Capacity batches plus the one each
// producer is filling.
//
// Run drains the queue into the next consumer on the caller's goroutine
// until Close; Close must be called after every producer has stopped (late
// batches get ErrClosed). Abort makes blocked and later producers fail with
// ErrClosed and Run return without draining.
type Queue struct {
	ch      chan *record.Batch
	next    Consumer
	emit    Emitter // next, if it takes ownership of batches
	onError func(error)
	pool    sync.Pool
	depth   atomic.Int64
	records atomic.Int64

	// maxBytes bounds the bytes of the batches in ch (record.Batch.Bytes,
	// SetMaxBytes; 0: only capacity bounds them); held counts them, and
	// room, made by the first producer that waits, is closed when Run
	// takes a batch.
	maxBytes int64
	held     atomic.Int64
	rmu      sync.Mutex
	room     chan struct{}

	closeOnce sync.Once
	mu        sync.RWMutex // guards closed against concurrent sends
	closed    bool
	abortOnce sync.Once
	aborted   chan struct{}

	tickEvery time.Duration
	tick      func(context.Context)
}

// OnTick makes Run call fn every d on its own goroutine, between batches
// (stages that hold records use it to hand them on when input pauses).
// Call before Run.
func (q *Queue) OnTick(d time.Duration, fn func(context.Context)) {
	q.tickEvery, q.tick = d, fn
}

// SetMaxBytes bounds the decoded data the queue holds besides its
// capacity in batches: a producer waits while the batches queued hold
// max bytes or more (record.Batch.Bytes; a batch is taken when the queue
// is empty, whatever its size). Batches of many records (256 to 1,024
// OTLP spans, about 1.5 kB each decoded) then queue by the few, not by
// the capacity's 64. Call before the first batch; 0 (the default) sets no
// bound.
func (q *Queue) SetMaxBytes(max int64) { q.maxBytes = max }

// maxPooledRecords bounds the batches kept for reuse, so one burst does not
// pin a huge batch in memory.
const maxPooledRecords = 1 << 16

// NewQueue returns a queue of capacity batches in front of next. onError
// hears about every error next returns (nil: ignored); Run goes on after it.
// If next is also an Emitter, Run hands batches over with Emit (no copy).
func NewQueue(capacity int, next Consumer, onError func(error)) *Queue {
	if capacity < 1 {
		capacity = 1
	}
	emit, _ := next.(Emitter)
	return &Queue{
		emit:    emit,
		ch:      make(chan *record.Batch, capacity),
		next:    next,
		onError: onError,
		aborted: make(chan struct{}),
	}
}

var _ Emitter = (*Queue)(nil)
var _ Consumer = (*Queue)(nil)

// NewBatch returns an empty batch from the queue's pool.
func (q *Queue) NewBatch() *record.Batch {
	if b, ok := q.pool.Get().(*record.Batch); ok {
		return b
	}
	return &record.Batch{}
}

// Recycle returns a batch the caller owns (one taken from the queue, or
// from NewBatch) to the queue's pool.
func (q *Queue) Recycle(b *record.Batch) {
	if b.Len() > maxPooledRecords {
		return
	}
	b.Reset()
	q.pool.Put(b)
}

// Emit enqueues b and returns an empty batch. An empty b is not enqueued and
// is returned as it is.
func (q *Queue) Emit(ctx context.Context, b *record.Batch) (*record.Batch, error) {
	if b.Len() == 0 && len(b.Done) == 0 {
		return b, nil
	}
	if err := q.send(ctx, b); err != nil {
		return b, err
	}
	return q.NewBatch(), nil
}

// Consume copies b into a batch of its own and enqueues it, for producers
// that keep their batch.
func (q *Queue) Consume(ctx context.Context, b *record.Batch) error {
	if b.Len() == 0 && len(b.Done) == 0 {
		return nil
	}
	c := q.NewBatch()
	c.Copy(b)
	c.Done = append(c.Done, b.TakeDone()...)
	c.Origin = b.Origin
	if err := q.send(ctx, c); err != nil {
		q.Recycle(c)
		return err
	}
	return nil
}

func (q *Queue) send(ctx context.Context, b *record.Batch) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	n := int64(b.Len())
	size, err := q.reserve(ctx, b)
	if err != nil {
		return err
	}
	q.depth.Add(1)
	select {
	case q.ch <- b:
		q.records.Add(n)
		return nil
	case <-ctx.Done():
		q.depth.Add(-1)
		q.release(size)
		return ctx.Err()
	case <-q.aborted:
		q.depth.Add(-1)
		q.release(size)
		return ErrClosed
	}
}

// reserve waits until b's bytes fit under maxBytes (or the queue holds
// none) and counts them; it returns what it counted.
func (q *Queue) reserve(ctx context.Context, b *record.Batch) (int64, error) {
	if q.maxBytes <= 0 {
		return 0, nil
	}
	size := int64(max(b.Bytes(), 1))
	for {
		h := q.held.Load()
		if h == 0 || h+size <= q.maxBytes {
			if q.held.CompareAndSwap(h, h+size) {
				return size, nil
			}
			continue
		}
		// The channel, then the count again: a take in between closes
		// the channel got here.
		q.rmu.Lock()
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.rmu.Unlock()
		if h := q.held.Load(); h == 0 || h+size <= q.maxBytes {
			continue
		}
		select {
		case <-room:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-q.aborted:
			return 0, ErrClosed
		}
	}
}

// release uncounts size bytes and wakes the producers waiting for room.
func (q *Queue) release(size int64) {
	if size == 0 {
		return
	}
	q.held.Add(-size)
	q.rmu.Lock()
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
	q.rmu.Unlock()
}

// Depth returns the number of batches waiting (and being sent).
func (q *Queue) Depth() int { return int(q.depth.Load()) }

// Enqueued returns the number of records accepted so far.
func (q *Queue) Enqueued() int64 { return q.records.Load() }

// Run hands every batch to the next consumer until the queue is closed and
// empty, or aborted. Call it once, on the goroutine that owns the consumer.
func (q *Queue) Run(ctx context.Context) {
	var tick <-chan time.Time
	if q.tick != nil && q.tickEvery > 0 {
		t := time.NewTicker(q.tickEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			q.tick(ctx)
		case b, ok := <-q.ch:
			if !ok {
				return
			}
			q.depth.Add(-1)
			if q.maxBytes > 0 {
				q.release(int64(max(b.Bytes(), 1)))
			}
			if q.emit != nil {
				// The consumer takes the batch and gives back one to reuse.
				nb, err := q.emit.Emit(ctx, b)
				if err != nil && q.onError != nil {
					q.onError(err)
				}
				if nb != nil {
					q.Recycle(nb)
				}
				continue
			}
			if err := q.next.Consume(ctx, b); err != nil && q.onError != nil {
				q.onError(err)
			}
			q.Recycle(b)
		case <-q.aborted:
			return
		}
	}
}

// Close stops accepting batches; Run returns once the queued ones are
// consumed. It is safe to call twice.
func (q *Queue) Close() {
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		close(q.ch)
		q.mu.Unlock()
	})
}

// Abort fails blocked and later producers with ErrClosed and stops Run
// without draining. It is safe to call twice.
func (q *Queue) Abort() {
	q.abortOnce.Do(func() { close(q.aborted) })
}
