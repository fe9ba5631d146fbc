// Package stream is the live stream sink: it publishes everything the
// bridge receives, batch by batch, to a JetStream repository (the
// embedded NATS server's, or an external server's) with retention by age
// and size, keeps the repository's metadata (record types, hosts,
// receivers, control settings) in a retained metadata message, answers
// remote-control commands, and publishes assembled traces. docs/STREAM.md
// describes subjects, messages and guarantees; internal/codec/streammsg
// encodes them; the public package stream reads them.
//
// Delivery: the stream is a best-effort sink. Consume encodes a batch
// into one message per (host, type) of its records and puts them in an
// outbox bounded by Config.Buffer; it never waits for the server. One
// publisher goroutine hands the outbox to JetStream with bounded
// publishes in flight, in order, on one connection, so records of one
// connection keep their order. While the server is unreachable the
// outbox holds what it can; what does not fit is dropped and counted
// (the metadata's lost count, and a jump of the per-subject counts that
// subscribers see). Metadata messages are never dropped: a new type or
// host gets a new metadata version before the first message that needs
// it.
//
// Goroutines: the engine's sink goroutine calls Consume and
// ConsumeTraces, its flush goroutine Flush (which refreshes and expires
// the metadata); the sink adds the publisher goroutine, and nats.go's
// goroutines run the control handler. A mutex guards the metadata and
// the encoder between them.
package stream
