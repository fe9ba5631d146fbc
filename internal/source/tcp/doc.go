// Package tcp is the TCP transport of the bridge (tracebridge serve): a
// Receiver accepts or makes TCP connections, decodes each connection's
// byte stream with its own Decoder and hands the records on to a
// pipeline.Consumer in batches.
//
// # Modes
//
//   - Server: listen on Config.Address; any number of clients (up to
//     Config.MaxConnections) connect and reconnect at will. KDB's tcp-server,
//     Kieker's single-socket TCP reader.
//   - SingleServer: accept exactly one connection; when it ends, Run returns
//     nil. Other connection attempts meanwhile are closed at once. KDB's
//     tcp-single-server.
//   - Client: connect out to Config.Address. With Respawn, reconnect with
//     capped exponential back-off whenever the connection fails or ends;
//     without it, a failed first connect is an error (ErrConnect) and the end
//     of the connection ends Run with nil. KDB's tcp-client.
//   - Dual: Kieker ≤1.12's TCPWriter and the DualSocketTcpWriter: records on
//     Config.Address, registry entries on Config.RegistryAddress. As Kieker's
//     own dual reader does, all connections of the receiver share one string
//     registry, guarded by one mutex held around every Decode. A records
//     connection that meets a string id the registry has not delivered yet
//     waits (up to Config.RegistryWait) for the registry connections to
//     register more, then retries the same bytes.
//
// Listeners are bound by New, so Addr reports the bound address (port 0
// picks a free one) before Run starts.
//
// # Per connection
//
// Each connection has one goroutine, one Decoder (from Config.NewDecoder,
// so each connection has its own Kieker registry or KDB interner), one read
// buffer (Config.ReadBuffer, grown only while a single unit is larger, up
// to Decoder.MaxUnit) and one batch. The loop is read → decode → hand on →
// repeat; nothing is allocated per record. After each read the records
// decoded from it are passed to Config.Transform and handed on: with
// pipeline.Emitter (a *pipeline.Queue) the filled batch is handed over and
// an empty one comes back; otherwise Consume is called and the batch reused.
// A consumer that blocks stops the reading, so TCP back-pressure slows the
// client and memory stays at one buffer and one batch per connection.
// Near the process's memory limit (Settings.Memory) a connection stops
// reading before its next read in the same way until the limit takes data
// again, or the receiver drains (each such wait counted in
// tracebridge_memory_refusals_total).
//
// # Lifetimes
//
// A batch handed on with Emit belongs to the consumer from then on. A batch
// handed on with Consume is the connection's own: the consumer may read it
// until Consume returns (pipeline's rule; to keep a record it clones it).
// Transform may change the records b.Records[from:] in place but must not
// keep b. Strings in the records are immutable Go strings (a connection's
// registry or interner), never views of the read buffer, so they may be
// kept.
//
// # Faults
//
// Every fault is confined to its connection: a malformed stream (a decode
// error, a limit exceeded, a unit larger than MaxUnit), a client that
// disconnects inside a record, or a panic in a decoder closes only that
// connection, after the records decoded before the fault were handed on
// (a malformed stream and a panic with a reset, so that the sender learns
// its stream was refused and not read to its end). It
// is logged in one line (keys receiver, peer, offset, err; the offset is the
// stream offset of the offending unit) and counted as a decode error. Such
// lines are rate-limited per receiver (Config.LogRate per second, then one
// "suppressed" line with the count). Limits (string length, record size,
// array length, registry entries) are the decoders': the factories carry
// them.
//
// # Shutdown
//
// When Run's context is cancelled (or Close is called) the receiver stops
// accepting (taking the connections already waiting in the listen backlog
// first) and lets every open connection drain: it keeps reading, decoding
// and handing on until the peer closes (EOF) or has sent nothing for
// Config.DrainTimeout. That is an idle timeout, renewed before every read:
// time a connection spends handing a batch to a slow consumer does not
// count, so bytes a client sent before the cancel and that still wait in
// the socket buffers are read however long the consumer takes. The drain as
// a whole has no time limit of its own — a peer that keeps sending keeps its
// connection draining; the bound is the consumer's: the bridge aborts its
// queue after its shutdown timeout. While draining, batches are handed on
// with a context that is not cancelled (context.WithoutCancel).
//
// A consumer that reports pipeline.ErrClosed (an aborted or closed queue),
// while draining or not, stops the receiver at once: every connection ends
// at its next read (or registry wait), Run returns an error wrapping
// pipeline.ErrClosed.
//
// Whatever a drain or a stop loses is logged at warning level, once per
// connection, with the rate limit of the fault lines (keys receiver, peer,
// offset, dropped_bytes, unread_bytes; records for a refused batch): the
// records of the batch the consumer refused, an incomplete unit cut by the
// idle timeout or the stop (dropped_bytes: read but not decoded), and bytes
// still waiting in the socket when the connection is closed (unread_bytes:
// read and counted for a few milliseconds before closing; a lower bound if
// the peer goes on sending). offset is the stream offset of the first byte
// whose records were not handed on. A connection that ends idle at a unit
// boundary with nothing unread loses nothing and is logged at debug level.
// Run returns only after every connection goroutine has ended; no goroutine
// outlives it.
//
// # Concurrency
//
// A Receiver runs once: Run is called at most one time. Close, Addr,
// RegistryAddr and Stats are safe for concurrent use. Decoders are used by
// one connection goroutine only and need not be safe for concurrent use.
// Config.Transform is called from the connection goroutines, concurrently
// for different connections. The consumer is called concurrently from the
// connection goroutines, one batch at a time per connection.
package tcp
