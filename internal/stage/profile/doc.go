// Package profile attaches a JVM's execution samples (JFR's
// jdk.ExecutionSample records) to the spans that were running on the
// sampled thread when each sample was taken, so that a slow span shows
// where its time went.
//
// The stage passes every record on unchanged and keeps, per (host, Java
// thread id), a ring of the recent samples: their time, the stack (frames
// interned, so repeated stacks are held once) and the thread state. The
// host is the batch's origin (a jfr receiver's configured host, by
// default the machine's host name); the thread id is the
// sampledThread.javaThreadId field. When the engine has assembled a trace
// it calls Enrich (pipeline.Enricher), and the stage looks up, for every
// span whose thread is a number (Kieker's TraceMetadata threadId, OTLP's
// thread.id, both the Java thread id: trace.Span.Thread) on the same host,
// the samples taken between the span's start and end. A span whose
// Process is known (OTLP process.pid) takes only samples of the JVM with
// that pid (the origin's session).
//
// # Representation
//
// A sample goes to the innermost span running on its thread at its time
// (the deepest span of that thread containing it), so it is counted once;
// a span's subtree holds every sample of its duration. A span with samples
// gets:
//
//   - attribute profile.samples (int): its samples;
//   - attribute profile.folded (string): their stacks in the folded format
//     of flame graphs, one line per distinct stack, frames from the root to
//     the leaf joined by ';', a space and the count, most frequent first,
//     at most MaxStacksPerSpan lines (the rest counted on one line
//     "[other stacks] N"); frames without line numbers unless Lines;
//   - events named profile.sample (up to MaxEventsPerSpan, the first in
//     time), one per sample, at the sample's time, with attributes
//     profile.stack (int: the line of profile.folded holding its stack,
//     from 0) and thread.state (JFR's state, e.g. STATE_RUNNABLE).
//
// So a 2-second span sampled every 20 ms carries about 100 events of two
// short attributes and one folded text with its distinct stacks, not 100
// copies of a 64-frame stack.
//
// # Flame graphs of a host
//
// Besides the rings, every sample is counted in a history per host and
// minute: samples per interned stack (Options.History minutes, an hour by
// default, behind the newest minute of any host; at most 20,000 distinct
// stacks per host and minute, more counted as one "[other stacks]"). A
// host silent for the whole history is forgotten; a sample more than five
// minutes ahead of the wall clock is not kept. Stacks answers the merged
// stacks of a host in a time window, to the minute; the stage publishes
// itself in pipeline.Shared as "profiles", where the HTTP API finds it.
//
// # Views and the event browser
//
// Every record also goes to internal/jfrview (JMC's views, Views) and to
// internal/jfrevents (the event browser's bounded window of each host's
// recent events, Events; Options.Events bounds it), which keep only JFR
// events.
//
// # Limits
//
// PerThread samples per thread (oldest dropped), samples older than Retain
// behind the newest of their thread dropped, MaxThreads threads (the one
// sampled least recently dropped), MaxSamples samples in all (threads
// sampled least recently dropped first), MaxFrames frames per stack (the
// leaf's kept), MaxStacks interned stacks (the table restarts when full).
// Memory is about MaxSamples × 48 bytes plus the distinct stacks, each
// MaxFrames × 16 bytes at most (frame strings are shared with the
// records). Samples that arrive after their span's trace was assembled
// (the trace window, 2 s by default, is longer than JFR's flush interval,
// 1 s) are not attached.
//
// # Without spans (a cluster node)
//
// With Options.NoSpans the stage keeps the flame graphs' history, the
// views and the event browser of what it receives but no samples per
// thread, and attaches none: serve sets it on a cluster node, whose
// traces are assembled by the partitions' owners while a host's samples
// stay on the node that received its JFR (docs/CLUSTER.md, "JFR on a
// cluster node"). The stage is then no pipeline.Enricher.
//
// # Concurrency
//
// The stage runs on the engine's drain goroutine (Consume, Enrich);
// Stats and Stacks may be called from any goroutine.
package profile
