// Package handoff runs a consumer on a goroutine of its own, so that the
// caller's work (reading and splitting a log, say) uses one core and the
// consumer's (encoding and writing) another. Consume copies the caller's
// batch, which the caller may reuse when Consume returns, and queues it;
// the consumer's first error is returned by the next Consume and by Close,
// and what is queued after it is dropped.
package handoff

import (
	"context"
	"sync"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Handoff passes batches on to a consumer running on a goroutine of its
// own: a pipeline.Queue in front of the consumer. Consume copies the
// caller's batch (which the caller reuses when Consume returns) and queues
// it; the first error of the consumer is returned by the next Consume and
// by Close, and what is queued after it is dropped.
type Handoff struct {
	q    *pipeline.Queue
	done chan struct{}

	mu  sync.Mutex
	err error
}

// New starts a Handoff to next, queueing at most depth batches, on a
// goroutine that Close waits for.
func New(ctx context.Context, next pipeline.Consumer, depth int) *Handoff {
	h := &Handoff{done: make(chan struct{})}
	guarded := pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
		if h.failed() != nil {
			return nil
		}
		return next.Consume(ctx, b)
	})
	h.q = pipeline.NewQueue(depth, guarded, func(err error) {
		h.mu.Lock()
		if h.err == nil {
			h.err = err
		}
		h.mu.Unlock()
	})
	go func() {
		defer close(h.done)
		h.q.Run(ctx)
	}()
	return h
}

func (h *Handoff) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Consume copies b and queues it; it returns the consumer's first error.
func (h *Handoff) Consume(ctx context.Context, b *record.Batch) error {
	if err := h.failed(); err != nil {
		return err
	}
	return h.q.Consume(ctx, b)
}

// Close waits for the queued batches to be consumed. It must be called
// once, after the last Consume.
func (h *Handoff) Close() error {
	h.q.Close()
	<-h.done
	return h.failed()
}

var _ pipeline.Consumer = (*Handoff)(nil)
