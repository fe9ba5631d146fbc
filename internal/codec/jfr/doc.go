// Package jfr reads JDK Flight Recorder recordings (format 2.x, JDK 11 and
// later): chunk headers, including the live protocol a JVM follows while
// it writes a chunk, the metadata event, constant pools and the checkpoint
// chain, and events, which it decodes into records of types built from the
// recording's own metadata. docs/jfr.md describes the bytes and the
// decisions taken here.
//
// The package does no I/O beyond the io.ReaderAt it is handed: callers
// (internal/source/jfr) open files, list repositories and poll.
//
// # Reading
//
//	s := jfr.NewStream(jfr.Options{Filter: f})    // one per recording or JVM
//	h, err := jfr.ReadHeader(chunkReader)         // ErrHeaderBusy: retry in 1 ms; ErrNotReady: no data yet
//	c, err := s.Open(chunkReader, chunkStart, h)  // metadata and constant pools
//	for {
//		n, err := c.Next(batch, 1024)             // appends records; io.EOF at the readable end
//		…
//	}
//	c.Update(newerHeader)                         // a live chunk grew: read on
//
// A Stream keeps what spans chunks: record types, the time base (the first
// chunk's, as the JDK's reader does, so that times equal jfr print's), the
// metadata when it does not change, and the previous chunk's constants. A
// finished chunk (header state 0) is read once; a live chunk is read up to
// the size its newest accepted header vouches for, so a half-written
// event is never read. The JVM sometimes writes constants in the
// checkpoint of a flush later than the events that use them, or only when
// it finishes the chunk (the class loaders of the jdk.ClassLoaderStatistics
// events it writes when a chunk begins, seconds to minutes earlier): Next
// holds such an event of a live chunk (Chunk.Held), reads on past it, and
// decodes it again after each newer checkpoint, until its constants are
// there or the chunk is finished, so that following a JVM gives the
// records reading its finished recording gives; a held event comes after
// events that follow it in the chunk (a chunk's events are not in time
// order anyway). Limits.MaxHeld bounds them. Chunk.Settle ends the
// waiting for a chunk that will not grow.
//
// # Record layout
//
// An event becomes one record whose type name is the event type's name
// (jdk.ExecutionSample, shop.Order) and whose fields are the event's
// fields in metadata order, flattened to the record model's primitive
// kinds by these rules, which make a record type stable per event type and
// let every value be checked against jfr print --json:
//
//   - Primitives keep their kind (boolean, byte, short, char, int, long,
//     float, double, string). A null string (encoding 0, or a reference
//     to a null or missing pool string) is record.NullString, an empty
//     one (encoding 1) "". An @Unsigned value
//     keeps its bits in the declared (signed) kind, as JDK 17's jfr print
//     shows it (JDK 21 and later print it unsigned).
//   - @Timestamp fields become long epoch nanoseconds (ticks converted
//     with the chunk header's ticks per second; MILLISECONDS_SINCE_EPOCH
//     multiplied); @Timespan fields become long nanoseconds. startTime is
//     also the record's logging timestamp. Long.MIN_VALUE (JFR's "no
//     value") stays Long.MIN_VALUE; values beyond the long range saturate.
//   - A thread (java.lang.Thread) becomes three fields: F (string: the
//     Java name, or the OS name for a thread without a Java id such as "VM
//     Thread", as jfr print shows it), F.javaThreadId (long) and
//     F.osThreadId (long).
//   - A class (java.lang.Class) becomes its name as Class.getName() gives
//     it: "java.lang.String", "[I", "Workload$Item".
//   - A method (jdk.types.Method) becomes "java.lang.Thread.sleep(long)":
//     class, method name, simple names of the parameter types.
//   - A stack trace becomes F (string[]: the frames, top first, each
//     "method line: N" like jfr print, e.g. "java.lang.Thread.run() line:
//     840"; the line is left out when negative) and F.truncated (boolean).
//     Every frame is kept (jfr print cuts at --stack-depth).
//   - A type marked simpleType (Symbol, ThreadState, FrameType, GCName, …)
//     becomes its only field's value ("STATE_RUNNABLE").
//   - Any other struct is flattened: its fields become F.sub, recursively,
//     up to MaxDepth (3) levels of such structs; deeper ones are left out
//     (jdk.ModuleExport: exportedPackage.module.classLoader.name).
//   - An array of primitives or of single-valued types becomes an array
//     field; an array of structs becomes one array per field of the struct
//     (F.sub[]), arrays inside its elements are left out.
//   - A constant that the chunk does not define is looked up in the
//     previous chunk's pools (a long event that began before the JVM
//     rotated the chunk refers to them); failing that, and for JFR's null
//     (key 0 of a thread, class or stack trace), the fields are zero:
//     null for its string fields (record.NullString), "" for a rendered
//     thread, class, method or frame, 0, false, no array.
//
// So jdk.ExecutionSample becomes startTime long, sampledThread string,
// sampledThread.javaThreadId long, sampledThread.osThreadId long,
// stackTrace string[], stackTrace.truncated boolean, state string; and an
// application's event gets startTime, duration, eventThread (three
// fields), stackTrace (two) and its own fields.
//
// Types are built from each recording's metadata: the same event type from
// two JVM versions may have different fields; a TypeSet shared by streams
// hands out one *record.Type per name and field list.
//
// # Limits and errors
//
// Limits bound event sizes, strings, arrays, the bytes of a chunk's
// constant pools and nesting; exceeding one is an error for that event or
// chunk. Errors are *FormatError values carrying the file offset and the
// reason. A malformed event is skipped (its size frames the next one); a
// chunk whose metadata, checkpoints or framing are broken ends there,
// and the caller goes on with the next chunk. Nothing panics on input.
//
// # Allocation
//
// Decoding into a reused record.Batch allocates nothing per event in the
// steady state: strings are interned per stream, constants (threads,
// classes, methods, whole stack traces with their frame lists) are
// decoded once per chunk and shared by every event that refers to them.
// Records must therefore be treated as read-only, as the pipeline's
// contract already says.
//
// # Concurrency
//
// A Stream and its Chunks belong to one goroutine. A TypeSet is safe for
// concurrent use.
package jfr
