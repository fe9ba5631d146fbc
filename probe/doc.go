// Package probe is tracebridge's monitoring client for Go programs: it
// records Kieker trace events (TraceMetadata, BeforeOperationEvent,
// AfterOperationEvent, AfterOperationFailedEvent, and SplitEvent and
// JoinEvent where work moves to other goroutines) and sends them to a
// tracebridge kieker-tcp receiver, or to any reader of Kieker's
// single-socket TCP protocol, from a background goroutine.
//
//	var opSearch = probe.NewOp("public []Book shop.Catalog.Search(string)", "shop.Catalog")
//
//	w, err := probe.NewWriter(probe.Config{Addr: "127.0.0.1:10133"})
//	…
//	defer w.Close()
//
//	t := w.StartTrace()                        // one per request or job
//	ctx = probe.WithTrace(ctx, t)
//	…
//	defer probe.FromContext(ctx).EnterOp(opSearch).ExitErr(&err)
//
// # What it owns
//
// A Writer owns a buffer of fixed-size records (lock-free ring buffers, one
// per shard), one goroutine that encodes them in Kieker's binary encoding
// and writes them in batches (one system call per batch), and the
// connection to the bridge with its string registry. The package owns a
// process-wide string table behind Op handles, causes and session ids
// (bounded by Limits).
//
// # Cost and failure
//
// A probe reads a clock (the processor's time-stamp counter where Linux
// trusts it, else the monotonic clock; see Clock), writes a 32-byte event
// into its trace's block and returns. It never allocates (operations are
// registered Op handles, strings become numbers), never blocks and never
// fails. A trace hands its block to the writer's ring in one step when its
// outermost operation ends (or the block holds 32 events, or at End). When
// the ring is full or the writer closed, records are dropped and counted;
// when the bridge is unreachable, the writer goroutine reconnects with
// capped exponential back-off while the ring holds what it can. Close sends
// what is buffered within a bounded time. Stats reports every count. A
// global switch (Enable) turns every probe into one atomic load.
//
// # Wire format
//
// Kieker's SingleSocketTcpWriter protocol: big-endian frames
// int32 classNameId | int64 loggingTimestamp | fields, every string an
// int32 id announced by a registry entry int32 -1 | int32 id | int32 byte
// length | UTF-8 bytes before its first use. Ids start at 0 on every
// connection; a new connection starts a new registry. Timestamps are
// nanoseconds since the Unix epoch; the logging timestamp is the event's
// own. Root traces have parentTraceId = traceId and parentOrderId = -1, as
// Kieker's Java probes write them.
//
// # Goroutines
//
// Work a request hands to other goroutines stays in its trace as Kieker
// keeps a thread started from a traced thread: Go (or Fork, for a context
// handed to a goroutine started otherwise) records a SplitEvent in the
// parent trace, taking its next orderIndex, and the goroutine's calls form
// a child trace whose TraceMetadata names the parent's traceId and that
// orderIndex (parentTraceId, parentOrderId); Trace.Join records a JoinEvent
// where the parent has waited for it.
//
// # Invocation identifiers
//
// Every child trace also records a tracebridge.trace.InvocationRecord
// naming the invocation that created it and that one's next orderIndex
// (see invocation.go), captured where the work is created (Fork, Go,
// Writer.Start), so that work run by pooled goroutines hangs under the
// call that submitted it. A root records its own only once it hands work
// on. Trace.InvocationHeader exports the identifier of the call open now
// as a string ("tb1-NODE-PID-INVOCATION-ORDER", ParseInvocationHeader)
// for a request to another process, which starts its trace with
// TraceOptions.Remote; the bridge then hangs that trace under the call.
//
// # Concurrency
//
// NewOp, Enable, SetLimits and every Writer method are safe for concurrent
// use. A Trace belongs to one goroutine at a time: its order index is not
// synchronised; start other goroutines with Go, or Fork a child trace for
// each on the parent's goroutine.
package probe
