// Package split cuts very long traces into linked partial traces at
// software boundaries (tracebridge split, and serve's --split stage), and
// puts them back together (tracebridge split --merge).
//
// It owns the boundary specs (Parse, Boundaries), the splitting stage
// (Stage, a pipeline.Consumer wrapping the next one) and its inverse
// (Merger). Neither does I/O.
//
// # Components
//
// The component of an event is decided by its class: classSignature for
// Before/After events (the class part of operationSignature when
// classSignature is empty), the class of operationSignature for an
// OperationExecutionRecord. Boundary specs are tried in order and the
// first that matches names the component:
//
//   - package:N: the first N segments of the class's package (a.b.c.D with
//     N=2 is a.b; a package with fewer segments is taken whole, the default
//     package is "");
//   - regex:P1 P2 …: each whitespace-separated pattern is a component,
//     named by the pattern; a pattern must match the whole class name;
//   - map:FILE: lines pattern=component (a pattern as for regex:, split
//     at the first '='; blank lines and lines starting with '#' skipped).
//
// Several specs are given as several arguments to Parse or separated by
// ';'. A class no spec matches is in the unnamed component "", which is a
// component like any other: a call between it and a named component
// crosses a boundary (so regex:com\.acme\.db\..* alone cuts every call
// into and out of the database layer). package:N matches every class.
//
// # Event traces
//
// A trace is a TraceMetadata (or ApplicationTraceMetadata) record followed
// by events with its traceId and consecutive orderIndex values: Before and
// After events (every Before…/EntryLevelBefore…/After… type of Kieker's
// flow.trace.operation packages, failed ones included) open and close
// calls; every other type with a traceId and an orderIndex (Call, Split,
// Join, …) is a point in the current call. When a Before event's component
// differs from its caller's, a partial trace starts:
//
//   - the Before is written to the enclosing (partial) trace as a leaf;
//   - a TraceMetadata follows, a copy of the trace's own (same type,
//     thread, session, host, application) with traceId =
//     childID(enclosing traceId, orderIndex of the leaf there),
//     parentTraceId = the enclosing traceId and parentOrderId = the leaf's
//     orderIndex there;
//   - the Before is written again as the root of the partial trace, with
//     orderIndex 0, and the events of the call follow in it;
//   - the After that closes the call is written to the partial trace,
//     then again to the enclosing trace as the leaf's After, and the
//     enclosing trace continues.
//
// Crossings nest. Every (partial) trace is numbered densely from its first
// event (Kieker's analyses require orderIndex 0, 1, 2, …): an event's
// orderIndex is its original one minus a shift that changes only when a
// partial trace closes. Records leave in input order with the inserted
// copies next to their originals, so only one frame per open call is
// kept, never an event: memory depends on the number of open traces and
// their depth, not on trace length. A trace that never crosses a boundary
// is written unchanged. A root call has no caller and never crosses; Call
// events never open a partial trace (a trace made only of Call events has
// no nesting to cut at and passes through unchanged). orderIndex is
// Kieker's int: its arithmetic wraps like Java's.
//
// A trace ends when its last open call returns; an event for a traceId that
// is not open (no TraceMetadata, or after the end) passes through
// unchanged and is reported. A trace that is found malformed (an
// orderIndex other than the next, an After without its Before, more nested
// calls than MaxDepth or MaxFrames allow) is reported with its traceId and
// from that event on passes through unsplit: its events go to the trace
// itself with the shift then in effect (zero unless a partial trace was cut
// out before), and no further partial trace is opened. What was split
// before stays split, and merging restores all of it. A trace still open
// at Finish is reported as never closed. When MaxOpenTraces traces are
// open, a new one evicts the least recently active trace, which is
// reported; its later events pass through unchanged.
//
// # OperationExecutionRecord traces
//
// An OperationExecutionRecord (with traceId other than -1 and eoi, ess ≥ 0)
// is written when its operation returns, so callers arrive after their
// callees. The records of such a trace are held back, in place, until its
// root (ess 0) arrives; then eoi/ess must form a call tree (eoi 0…n-1,
// each ess at most one deeper than the previous in eoi order), else the
// trace is reported and written unchanged. A record whose component
// differs from its caller's starts a partial trace: a new traceId
// (childID(parent traceId, the call's eoi in the parent)), eoi renumbered
// from 0 in pre-order and ess relative to the crossing call. The crossing
// record is written twice in its place: as the partial trace's root (eoi
// 0, ess 0), then as a leaf of its parent. A TraceMetadata for every
// partial trace (threadId -1, the root record's session and host,
// parentTraceId/parentOrderId = the parent and the leaf's eoi) is written
// before the trace's first record, parents first.
//
// While any record is held back every later record waits behind it, so the
// output keeps the input's order exactly. At most MaxBuffered records wait,
// none longer than MaxHold (checked by Consume and by Flush, which a bridge
// calls periodically): beyond that the oldest incomplete trace is reported
// and passes through unsplit (its later records too). Traces still
// incomplete at Finish pass through unsplit.
//
// # Merging
//
// A Merger recognises an event partial trace by its TraceMetadata:
// traceId == childID(parentTraceId, parentOrderId) and the parent's last
// event is the Before with orderIndex parentOrderId. It drops that
// TraceMetadata, the partial trace's copy of the crossing Before and the
// parent's copy of the closing After, and writes every event with the
// original traceId and orderIndex (its orderIndex plus its partial trace's
// shift, tracked as the Stage tracks it). A split OperationExecutionRecord
// family is recognised by the TraceMetadata records before it, held back
// until its root arrives, and rebuilt in pre-order. Kieker's own child
// traces (threads, remote calls) never match and are left alone; a log
// that was not split is passed through unchanged. Merging undoes every
// level of splitting at once. Run the Merger with the Options the Stage
// ran with: both then forget the same traces at the same records, and
// merge(split(log)) is the log, record for record and in the same order.
//
// # In a bridge
//
// The Stage runs on the bridge's drain goroutine, between the receivers and
// the sinks. Call Flush periodically (held-back OperationExecutionRecords
// move on after MaxHold) and Finish once the queue is drained, before the
// sinks are flushed and closed: it passes on what is still held back and
// reports the traces still open. OnMalformed is the hook for counting
// malformed traces in metrics; Stats gives the totals.
//
// # Lifetimes and concurrency
//
// Consume reads the caller's batch only until it returns (records held
// back are copied). The batch handed to the next consumer belongs to the
// Stage or Merger and is reused after the next consumer returns. Batch
// Done callbacks are not handled: the bridge takes them off before its
// stages. A Stage or Merger serialises Consume, Finish and Stats on a
// mutex; it is meant for one goroutine (a bridge's drain goroutine), with
// Stats readable from any. An error from the next consumer is returned
// as is; the stage's view of open traces has moved on, so a retry of the
// same batch would be seen as new records.
package split
