// Package pipeline defines the contracts between sources, stages and sinks,
// the factories that build them from their configuration, and the bounded
// batch queue.
//
// Data flows source → decode → stage → sink. A Source decodes bytes into
// record batches and hands each batch to a Consumer. A Stage wraps the next
// Consumer. A Sink is a Consumer that can be flushed and closed. The engine
// (internal/engine) runs them: one goroutine per source, one drain
// goroutine that owns the stages, and one goroutine with its own queue per
// sink (the fan-out).
//
// Ownership: a batch passed to Consume belongs to the caller. The consumer
// may read it until Consume returns and must not keep the batch, its
// Records slice or their Values afterwards; to keep a record it calls
// Record.Clone. Strings inside values are immutable and may be kept. A
// batch passed to Emit changes hands: the callee owns it and gives back an
// empty one.
//
// Back-pressure: Consume may block (a slow disk); a source then stops
// reading its input, so memory stays bounded by the batches in flight.
//
// Components: every receiver, stage and sink type has a factory
// (ReceiverFactory, StageFactory, SinkFactory) in its own package: its type
// name, its own configuration struct with defaults (decoded from its YAML
// node, validated by its Validate method) and a constructor that takes that
// configuration plus the shared Settings. `tracebridge serve` builds from
// one explicit list of factories (internal/serve.DefaultFactories); adding
// a component is one package plus one line there.
//
// Import rules: components import this package, the record model, codecs
// and helpers; never the engine, internal/serve, internal/config or the
// public bridge package. Stages never import sinks or sources; sources
// never import sinks.
package pipeline

import (
	"context"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
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

// Source is a receiver at work. Run hands decoded batches to out until ctx
// is cancelled or the source ends by itself (a single-connection server
// whose connection closed); it returns nil then. After ctx is cancelled a
// source still hands on what its peers already sent (using a context that
// is not cancelled), then returns. An error from Run ends the whole bridge.
//
// out also implements Emitter; sources that fill batches of their own hand
// them on with Emit and keep filling the batch it returns.
type Source interface {
	Run(ctx context.Context, out Consumer) error
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, out Consumer) error

// Run calls f.
func (f SourceFunc) Run(ctx context.Context, out Consumer) error { return f(ctx, out) }

// Stage wraps the next consumer (trace splitting, filters, …). The
// consumer it returns runs on the engine's drain goroutine only, so it
// needs no locking of its own state. It may implement Flusher, Finisher
// and Holder.
type Stage func(next Consumer) Consumer

// Flusher is a stage that holds records back (waiting for the rest of a
// trace): the engine calls Flush between batches every 100 ms, so held
// records move on while input pauses.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Finisher is a stage that must hand on what it still holds at the end:
// the engine calls Finish once after the last batch, before the sinks are
// closed, on the drain goroutine.
type Finisher interface {
	Finish(ctx context.Context) error
}

// Enricher is a stage that adds to assembled traces what it saw in the
// records (JFR execution samples on a traced thread during a span): the
// engine calls Enrich for every completed trace, on the drain goroutine
// (assembly then runs there, not on workers),
// before the trace goes to the sinks. It may change the trace.
type Enricher interface {
	Enrich(t *trace.Trace)
}

// Holder is a stage that may hold records back, in input order: Held
// returns how many it holds now. Sources' Done callbacks wait until the
// stage has handed their records on.
type Holder interface {
	Held() int
}

// Sink is a Consumer at the end of a pipeline. The engine calls Consume
// from one goroutine of the sink's own, Flush from another (a sink must
// allow Flush concurrently with Consume), and Close once after both.
type Sink interface {
	Consumer
	// Flush makes every record consumed so far durable (written to the
	// operating system, or acknowledged by the next hop). When it fails,
	// the engine fails the Done callbacks waiting for it (those sources
	// send again) and goes on: it does not hand the records on again, so
	// records of sources without Done callbacks (Kieker TCP, files) are
	// lost unless the sink keeps them for a later Flush and holds Consume
	// back meanwhile, as the cluster's publisher does.
	Flush() error
	// Close flushes and releases the sink. It is safe to call twice.
	Close() error
}

// Aborter is a sink whose Consume may block for long (a peer that stopped
// reading). Abort, called from another goroutine at shutdown, makes a
// blocked Consume return soon so that Close can run; records not sent are
// dropped and counted.
type Aborter interface {
	Abort()
}

// Dropper is a best-effort sink that wants to know what the engine
// dropped for it: when the sink's queue is full, the engine calls Dropped
// with the oldest batch before dropping it, on the drain goroutine (or on
// an assembly worker making room for assembled traces: calls may come
// from several goroutines at once), concurrently with Consume. The batch
// is the caller's: read it until Dropped returns. (The stream sink counts
// the records, so subscribers are told what they missed.)
type Dropper interface {
	Dropped(b *record.Batch)
}

// Backlogger is a sink that wants to know whether more waits in its
// queue (the stream packs the records of several queued batches into one
// message when it is behind). The engine calls SetBacklog once, before
// the first Consume, with a function that returns how many entries wait
// in the sink's queue; Consume may call it.
type Backlogger interface {
	SetBacklog(queued func() int)
}

// TraceConsumer is a sink that also takes assembled traces. When a sink
// implements it, the engine assembles traces from the records it hands on
// (internal/trace.Assembler) and puts each completed trace into the queue
// of every such sink, behind the records it was assembled from; there is
// no second pipeline.
type TraceConsumer interface {
	// ConsumeTraces takes completed traces. They are shared by every
	// trace consumer and must not be modified; they may be kept.
	ConsumeTraces(ctx context.Context, ts []*trace.Trace) error
	// TraceSources says which traces the sink wants (traces assembled
	// only from other kinds of records are not built for it).
	TraceSources() trace.Sources
}

// LeanTraceConsumer is a TraceConsumer that needs the shape of a trace
// only (operations, hosts, services, threads, times, ids and status), not
// its spans' attributes, events and links. When every trace consumer of
// a bridge is lean, the assembler does not keep them (less memory while
// traces wait for their window).
type LeanTraceConsumer interface {
	TraceConsumer
	LeanTraces() bool
}

// PackedTraceConsumer is a TraceConsumer that reads each trace once,
// through a trace.Unpacker, and keeps nothing of its Spans (the store
// encodes it, the Kieker log writes it; several consumers may read the
// same packed trace at once). When a sink takes packed traces and no
// stage enriches them, the assembler emits traces of span records packed
// (trace.Options.Packed); the engine makes the Spans of those that a
// trace consumer reading Spans takes before handing them on, so only
// the traces such a consumer wants are made Spans.
type PackedTraceConsumer interface {
	TraceConsumer
	PackedTraces() bool
}

// TracesOnly is a TraceConsumer whose Consume ignores records (the store
// sink): the engine queues it traces and acknowledgement markers only,
// so the batches it would ignore are not held in its queue while it is
// behind (its record count still counts them).
type TracesOnly interface {
	TraceConsumer
	TracesOnly() bool
}
