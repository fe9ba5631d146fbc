// Package reconstruct is Kieker's trace reconstruction as its
// trace-analysis tool does it, from log records straight to execution
// traces, streaming: each trace is handed on the moment Kieker's tool
// would hand it on, with the system model's entities numbered at the
// moment Kieker numbers them, so nothing of a trace is kept once it is
// handed on. What is kept is what Kieker's numbering and order need: the
// open traces, the system model's entities, and the ids of invalid
// OperationExecutionRecord traces.
//
// The stages it reproduces (kieker-monitoring/kieker, analysis/…/trace/):
//
//   - TimestampFilter and TraceIdFilter: records outside
//     --ignore-executions-before/after-date are dropped one by one (an OER
//     by its tin and tout, an event by its timestamp, TraceMetadata by its
//     logging timestamp), which may leave a trace with gaps; likewise
//     --select-traces/--filter-traces by traceId.
//   - EventRecordTraceReconstructionStage (no timeouts, as the tool runs
//     it): a thread trace (traceId) is buffered until it is finished: its
//     TraceMetadata came, a Before event with orderIndex 0 came, every
//     Before has its After and the orderIndexes count 0…n-1 without a gap
//     or a duplicate. It is handed on at once, so what comes later with
//     the same traceId is a new trace without TraceMetadata (invalid). At
//     the end of the log the traces left are handed on by traceId, valid
//     or invalid. --repair-event-based-traces closes calls whose After
//     events are missing (TraceBuffer's repair).
//   - TraceEventRecords2ExecutionAndMessageTraceStage: a finished trace
//     becomes an execution trace; executions are made (and their entities
//     numbered) as calls return; CallOperationEvents whose callee has no
//     events make "assumed" executions, closed by the caller's next event
//     (--ignore-assumed-calls: not marked assumed); constructor events'
//     signatures have no return type.
//   - ExecutionRecordTransformationStage and TraceReconstructionStage:
//     an OperationExecutionRecord is an execution the moment it is read
//     (numbered then, in file order); its trace is handed on once the
//     latest tout seen is more than --max-trace-duration past the trace's
//     earliest tin, oldest first (by the tin of its lowest eoi, then
//     traceId), and the rest at the end of the log.
//   - ExecutionTrace.toMessageTrace's checks decide whether an execution
//     trace is valid.
//
// Where this departs from Kieker's tool: a logging timestamp of -1 (a
// log written without them) never drops a TraceMetadata (Kieker's
// TimestampFilter would, with its default lower bound 0), and records
// with negative times are kept unless a date bound is given. Kieker runs
// the event and OER paths on two threads, so how their traces interleave
// in its outputs is not fixed; here they come in the order the log gives.
// Thread-based events (BeforeThreadBasedEvent…) are not turned into trace
// events.
//
// A Reconstructor is used by one goroutine.
package reconstruct
