// Package otlp decodes OpenTelemetry trace exports (OTLP
// ExportTraceServiceRequest) into span records (trace.SpanType), in
// protobuf and in OTLP/JSON, and writes an assembled trace as OTLP/JSON
// (AppendTraceJSON: the API's and the web UI's "OTLP JSON" download).
//
// The protobuf decoder reads the wire format in place, field by field, as
// VictoriaMetrics reads its protocols: there are no generated structs and
// no pdata per span. Strings are interned in a table of fixed size per
// Decoder (two-way sets by hash, small enough to stay in the processor's
// cache; see strtab), behind which the decoders of one receiver may share
// one (Strings), so repeated keys, names, services and values are
// allocated once, and a span attribute seen before (its KeyValue bytes)
// is taken whole from a second table without being read again. A span
// costs its record's values in the batch arena and nothing on the heap
// beyond strings the decoder has not seen before. Values that nest
// (arrays, key-value lists) pass through a small node arena of the
// Decoder's, reused for every value.
//
// OTLP/JSON (the protobuf JSON mapping OTLP specifies: hex trace and span
// ids, lowerCamelCase or snake_case keys, 64-bit integers as strings or
// numbers, enums as numbers or names) is read by a small scanner of its
// own into the same records; it favours exactness over speed.
//
// # Records
//
// One record of trace.SpanType per span, its fields as trace's Span*
// indexes say. Resource attributes: service.name → service (else
// trace.UnknownService, "unknown_service", as OpenTelemetry's SDKs name
// it), host.name → hostname (else the service), process.pid → process; all
// of them, these three too, → resource/resourceTypes in the order sent,
// followed, when the instrumentation scope has a version or attributes, by
// the pair (otel.scope.version, its version) of type trace.ScopeMark and
// the scope's attributes (one list shared by the spans of one resource and
// scope in one batch). Span attributes → attributes/attributeTypes, all of
// them, in the order sent; thread.id (else thread.name) is also copied to
// thread and code.namespace to component. The instrumentation scope's name
// → scope. Values are text as trace.ValueType says: strings as they are,
// booleans true/false, integers in decimal, doubles as JavaScript and
// encoding/json print them (shortest digits, exponent below 1e-6 and from
// 1e21; NaN, Infinity, -Infinity), bytes in standard base64, arrays and
// key-value lists as JSON (keys sorted, a repeated key's last value, no
// HTML escaping) — exactly what pdata's Value.AsString gives, except that
// a NaN or infinity inside an array or list is written as a JSON string
// where pdata gives up. Events: name, time (decimal epoch ns), attributes
// (a JSON object as above) per event; links: trace id (hex), span id
// (hex), trace state, attributes (JSON) per link. Span kinds outside 0–5
// and status codes outside 0–2 become 0. Dropped-attribute counts, link
// flags and schema URLs are not kept.
//
// # Errors and limits
//
// A message that is not well-formed (a truncated field, a wire type that
// does not fit the field, bad JSON) is an *Error naming the byte offset
// and the reason; nothing of it is kept, and the receiver answers 400 /
// INVALID_ARGUMENT. A span that is well-formed but unusable — an id of the
// wrong length, an all-zero trace or span id, more attributes, events or
// links than the limits allow, a string longer than MaxStringLen, a value
// nested deeper than MaxDepth — is rejected on its own and counted in the
// Result (OTLP's partial success), with the reason of the first one. A
// resource or scope that breaks a limit rejects its spans. Every limit is
// in Options.
//
// # Concurrency
//
// A Decoder is not safe for concurrent use; give each connection or
// request its own (a sync.Pool of them works). The message bytes may be
// reused once Decode returns: records never alias them.
package otlp
