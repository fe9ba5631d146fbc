// Package pipeline defines the contracts between sources, stages and sinks
// and the small adapters around them.
//
// Data flows source → decode → stage → sink. Sources decode bytes into
// record batches and hand each batch to a Consumer. A stage is a Consumer
// that wraps the next Consumer; a sink is a Consumer that can be flushed and
// closed.
//
// Ownership: a batch passed to Consume belongs to the caller. The consumer
// may read it until Consume returns and must not keep the batch, its
// Records slice or their Values afterwards; to keep a record it calls
// Record.Clone. Strings inside values are immutable and may be kept.
//
// Back-pressure: Consume may block (a slow disk); a source then stops
// reading its input, so memory stays bounded by the batches in flight.
package pipeline

import (
	"context"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Consumer receives batches of records.
type Consumer interface {
	// Consume processes b. An error means the records were not (all)
	// accepted; the caller decides whether to retry, drop or stop.
	Consume(ctx context.Context, b *record.Batch) error
}

// ConsumerFunc adapts a function to the Consumer interface.
type ConsumerFunc func(ctx context.Context, b *record.Batch) error

// Consume calls f(ctx, b).
func (f ConsumerFunc) Consume(ctx context.Context, b *record.Batch) error { return f(ctx, b) }

// Sink is a Consumer at the end of a pipeline.
type Sink interface {
	Consumer
	// Flush makes every record consumed so far durable (written to the
	// operating system, or acknowledged by the next hop).
	Flush() error
	// Close flushes and releases the sink. It is safe to call twice.
	Close() error
}
