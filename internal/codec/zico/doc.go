// Package zico is the wire layer of zorka 1.x agents talking to a zico
// collector (ZICO 1.x): frames, zorka's objects as Fressian structs, a
// per-connection symbol table, and an encoder that writes what zorka's
// agent writes. It does no I/O of its own beyond reading an io.Reader;
// the sessions and the server are in package source/zico. The byte facts
// are in ../shared/ZICO.md.
//
// # Frames
//
// A frame is an 18-byte header — magic 21 C0 BA BE, type (int16),
// payload length (int32), CRC-32 of the payload in an int64 — and the
// payload. AppendFrame writes one; a FrameReader reads them from a stream
// with a payload limit (DefaultMaxPayload, 16 MiB) and checks the magic
// byte by byte and the CRC. Its errors say which reply zico's server
// gives before closing (ReplyTo).
//
// # Objects
//
// A payload is a sequence of Fressian objects (package fressian) whose
// caches are new for every payload. Decoder.DecodeData reads them in
// order and calls visit for each: *HelloRequest, *Symbol, *Trace (a
// TraceRecord at the top level), *TraceMarker, and *Unknown for
// everything else (PerfRecord_v1, metrics, bare values), which zico
// ignores. Given a SymbolMap, it registers each Symbol as it comes and
// resolves every later id to its name, so a trace arrives with its names.
// Errors follow zico's server: a payload that ends inside an object
// reports ErrFressianTruncated after the objects before it were visited
// (zico stores them and replies OK); any other error (ErrMalformed,
// ErrType, ErrLimit) is a payload zico refuses by closing without a reply,
// and none of its objects count. Java's read handlers read the fields they
// know whatever count a struct declares (FieldCount), and cast what they
// read: a value of the wrong type fails after it has been read, so a
// truncated payload is reported as truncated wherever Java would meet the
// end of the stream.
//
// Limits (Limits): besides the Fressian ones, records per payload
// (MaxRecords), records, attributes and stack elements per payload
// together (MaxItems), nesting of records and exception causes (MaxDepth),
// attributes per record (MaxAttrs), stack elements per exception
// (MaxStack), and per connection the symbols and their bytes (SymbolMap).
//
// # Memory and lifetimes
//
// A Decoder keeps its records, attributes, exceptions and values in
// blocks it reuses from payload to payload, so decoding a payload
// allocates only the strings it carries (attribute strings, exception
// messages; names come from the SymbolMap) once the blocks have grown.
// The objects given to visit, and everything they point to, are valid
// until the next DecodeData call on the same Decoder; the strings may be
// kept forever. Callers that keep traces longer copy them.
//
// # Mapping onto spans
//
// A Trace is one call tree. Each TraceRecord is a span:
//
//   - operation: Operation() = Class + "." + Method + Signature, the JVM
//     signature as zorka sends it ("com.acme.Shop.buy(Ljava/lang/String;)V").
//     The component/service is the host of the connection (HELLO's
//     hostname, Session's host).
//   - time: Time is the duration in ns. zorka sends no start time per
//     call: only a record with a Marker (the root, and roots of embedded
//     traces) has Marker.Clock, the wall clock in ms when the trace began.
//     Children are in call order, so a start for each child can only be
//     estimated (e.g. packed one after the other from the parent's start,
//     a lower bound); say so in the span rather than invent precision.
//   - error: Threw() — the call threw (an Exception here, or
//     FlagExceptionPass: it rethrew its last child's, see FindException).
//     A trace's error state is Marker.Flags&MarkerError (set by zorka on
//     an exception at the root and by rules such as HTTP status ≥ 500).
//   - attributes: Attrs, key (resolved symbol) → typed Value (int, bool,
//     float, double, string, tagged value, or another Fressian value),
//     in the agent's order.
//   - exception: Exception.Class, Message, Stack (class, method, file,
//     line per frame; file "<null>" when unknown, line −1 unknown, −2
//     native) and the Cause chain. FlagExceptionWrap marks a call that
//     wrapped its child's exception.
//   - trace type and identity: Marker.TraceType ("HTTP", "EJB", …) names
//     the kind of trace. zorka 1.x has no trace or span ids: derive them
//     (e.g. from host, clock and the record's position). An inner record
//     with FlagTraceBegin and its own Marker starts an embedded trace.
//   - counters: Calls (this call and all below it, also dropped ones),
//     Errors, FlagOverflow (children were dropped), FlagDroppedParent and
//     MarkerOverflow mark incomplete trees: mark such traces as broken,
//     never reject them.
//   - Trace.Unresolved counts ids no Symbol announced (names ""), also a
//     reason to mark a trace.
//
// # Encoding
//
// Encoder writes the same objects byte for byte as zorka's writer
// (golden tests reproduce ZICO.md §5), and AppendNewSymbols announces the
// symbols a record uses in zorka's order. The test agent in zicotest
// builds on them.
//
// # Concurrency
//
// Decoder, Encoder, FrameReader and SymbolMap serve one connection at a
// time and are not safe for concurrent use.
package zico
