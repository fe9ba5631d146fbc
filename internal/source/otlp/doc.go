// Package otlp holds the OpenTelemetry trace receivers: otlp-grpc (the
// gRPC TraceService/Export) and otlp-http (POST /v1/traces, protobuf or
// JSON, optionally gzip-compressed). Both decode each request in place
// with internal/codec/otlp into span records (trace.SpanType) and hand the
// batches on with the pipeline's Emit.
//
// Responses follow the OTLP specification: success with partial_success
// (rejected_spans, error_message) when some spans were unusable; 400 /
// INVALID_ARGUMENT naming the byte offset and reason for a malformed
// message (nothing of it goes on); 413 for a body over max_message_size
// (after decompression — a gzip bomb stops there); 415 for another
// content type or encoding. When the pipeline does not take a batch
// within emit_timeout (a full engine queue: back-pressure), the request is
// answered 429 / RESOURCE_EXHAUSTED with a retry delay (Retry-After,
// RetryInfo) instead of waiting longer; the spans of that request already
// handed on stay handed on, so a client's retry may deliver them twice
// (OTLP is at-least-once). Near the process's memory limit
// (pipeline.Shared's Memory, internal/memlimit) a request is answered the
// same way before its body is read, and nothing of it goes on
// (tracebridge_memory_refusals_total). A pipeline that has closed answers
// 503 / UNAVAILABLE.
//
// Goroutines: the gRPC and HTTP servers' own, one per connection and one
// per request; a request decodes and emits on its goroutine with a
// decoder (and its interner) taken from a pool. Run serves until its
// context is cancelled, then stops accepting, lets the requests in flight
// finish (each is bounded by emit_timeout once decoded) for up to
// drain_timeout, and returns after every handler has returned.
package otlp
