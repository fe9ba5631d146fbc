// Package memlimit holds the memory limit of the whole `serve` process
// (the YAML key memory_limit) and tells the receivers when to refuse new
// data, as the OpenTelemetry Collector's memorylimiter does.
//
// # The limit
//
// memory_limit is what the process may use. Unset, it is derived from the
// machine (Default): three quarters of the smaller of the cgroup's limit
// (cgroup v2 memory.max, v1 memory.limit_in_bytes) and the machine's
// memory (MemTotal of /proc/meminfo), at least 128 MiB, at most 16 GiB
// (the bridge's fixed part needs about 64 MiB). The Go runtime's
// soft limit (debug.SetMemoryLimit, what GOMEMLIMIT sets; GoLimit) is 85 %
// of it less the Reserve, the binary's pages in memory (FileRSS: RssFile
// of /proc/self/status, which the runtime does not count), unless the
// environment sets GOMEMLIMIT, which then stays as the user gave it. The
// store sink sizes its read cache within a quarter of it and its heads
// within an eighth (Budget).
//
// # The target
//
// memory_target (Options.Target) is the size the process aims to stay
// under without refusing anything: `tracebridge serve` uses DefaultTarget
// (256 MiB) when the configuration sets neither memory_limit nor
// memory_target (serve.Settings.MemoryTarget; a program embedding the
// bridge gets none).
// The Go runtime's soft limit is then GoPercent of the target less the
// reserve (GoTarget) instead of the limit's, so the collector runs more
// often as the heap comes near the target; Sample raises it to usage
// plus FloorPercent of it when that is more (SoftLimit), at most GoLimit,
// so live data that outgrows the target takes the soft limit up with it
// rather than keeping the collector running back to back. The floor
// follows the last collection's figures, one Interval late: collections
// that come sooner than that (every 0.1-0.5 s while the heap stays near
// the target) may still find less headroom than FloorPercent, and the
// runtime also counts what usage leaves out (the heap's fragmentation).
// A target at or
// above the limit is none. Sample hands the soft limit to
// Options.SetSoft (serve: debug.SetMemoryLimit, unless GOMEMLIMIT is set)
// when it moved by more than 1/32. Budget stays the limit's.
//
// # What is measured, and when receivers refuse
//
// A Limiter samples the Go runtime's own figures (runtime/metrics, which
// stops no goroutine) every Interval (100 ms), never per record: its
// usage is the live heap the last garbage collection marked plus what the
// runtime holds outside the heap (goroutine stacks, metadata, buffers):
// the data in flight (decoded batches in the queues, traces waiting for
// their window, requests being read) and the bridge's fixed part, without
// the garbage not collected yet. Once usage reaches 70 % of GoLimit the
// Limiter refuses (Admit is false, Wait blocks) until usage falls below
// 60 % (the margin above is for what was admitted before a sample saw
// the rise: requests being read and decoded, batches queued); while it refuses and no collection ran for half a second it runs
// one (runtime.GC), so a bridge that took nothing new notices that its
// queues drained. Each receiver answers a refusal with its protocol's
// retryable answer: OTLP/HTTP 429 with Retry-After, OTLP/gRPC
// RESOURCE_EXHAUSTED with RetryInfo, ZICO INTERNAL_ERROR (the agent
// reconnects and sends the packet again), the TCP receivers stop reading
// (TCP back-pressure), the broker receivers stop taking messages (the
// broker keeps them unacknowledged).
//
// Logging: one line when refusing starts and one when it stops, at most
// one start line per LogPeriod (10 s); episodes in between are counted in
// the next line. Metrics: tracebridge_memory_limit_bytes,
// tracebridge_memory_usage_bytes, tracebridge_memory_refusing and, per
// receiver, tracebridge_memory_refusals_total.
//
// # Concurrency
//
// Admit and Wait are safe for concurrent use and cheap (Admit is an
// atomic load while data is taken). Run samples on its caller's
// goroutine until its context ends.
package memlimit
