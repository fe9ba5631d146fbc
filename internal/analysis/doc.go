// Package analysis holds the analyses of assembled traces. First,
// Kieker's trace analysis without Java: the dependency graphs (execution
// containers, deployment and assembly components, deployment and
// assembly operations), the aggregated call trees, the call tree of one
// trace, response times per node, and statistics per
// operation, computed from assembled traces (*trace.Trace) of any source:
// Kieker event traces, OperationExecutionRecords and OTLP spans.
//
// Kieker's semantics are the specification (kieker-tools' trace-analysis:
// TraceEventRecords2ExecutionAndMessageTraceFilter, TraceReconstructionFilter,
// ExecutionTrace.toMessageTrace, the dependency-graph and call-tree filters
// and their DOT formatters):
//
//   - A Kieker trace is one traceId: a thread's TraceMetadata and its
//     events, or every OperationExecutionRecord with that traceId. Threads
//     of one request (parentTraceId) stay separate traces, as in Kieker.
//     An OTLP trace is one trace.
//   - Invalid traces are dropped, as Kieker's tool does with
//     --ignore-invalid-traces (without it, Kieker stops at the first one):
//     events without TraceMetadata, gaps or duplicates in orderIndex, calls
//     that never return or return out of order; executions whose eoi do not
//     count 0, 1, 2, … or whose ess starts above 0 or grows by more than
//     one. OERs with traceId -1 form no trace. Kieker hands a thread trace
//     on when its first root call has returned, so what follows it (more
//     root calls, stray events) is a trace without TraceMetadata: invalid,
//     while the first call stays (Messages reports such parts).
//   - An execution runs on an execution container (Kieker's hostname; an
//     OTLP span's service, else its host), in an assembly component (the
//     event's classSignature, else the class parsed from the operation
//     signature; an OTLP span's component, else its scope, else its
//     service); its deployment component is "<container>::<assembly>".
//     Operation signatures are parsed by Kieker's rules (ParseSignature).
//   - Every synchronous call is one message: from the caller's execution,
//     or from the 'Entry' node for a trace's root calls, to the callee's.
//     A dependency graph's edge counts the messages between its two nodes;
//     a call tree's edges carry the call order (1 on the entry call) or, in
//     the aggregated trees, the number of calls.
//   - Response times (a node's min/avg/max/total) register the callee's
//     duration for every message whose two ends are different nodes
//     (Kieker's ResponseTimeNodeDecorator ignores calls within a node).
//
// Beside Kieker's analyses, the views of one trace the HTTP API serves:
// a Tree (NewTree) holds a trace's shape and gives its View (pruned to
// the longest spans, what it leaves out counted), its CriticalPath
// (Jaeger's algorithm) and its Flame graph; FoldedFlame makes the flame
// graph of folded profile stacks, Compare merges the call trees of two
// traces by path.
//
// An Analyzer is used by one goroutine; Graphs it returns are the caller's.
// A Tree is read-only once made; views it returns are the caller's.
package analysis
