// Package forward is a sink that sends records over TCP to another receiver,
// so that bridges chain and a Kieker log can be replayed to a bridge.
//
// Two protocols, chosen by the target URL:
//
//   - kieker-tcp://HOST:PORT: Kieker's single-socket TCP protocol, exactly
//     what Kieker's SingleSocketTcpWriter sends: no preamble, registry entries
//     int32 -1 | int32 id | int32 length | bytes before the first frame that
//     uses them, frames int32 classId | int64 loggingTimestamp | fields. Every
//     connection starts a new string registry, as the receiver keeps one per
//     connection. A connection whose registry reaches
//     Config.MaxRegistryEntries is closed after its last complete batch and
//     the next batch opens a fresh one, so neither side's registry grows
//     without bound.
//   - kdb-tcp://HOST:PORT: the KDB binary dialect under the ids of a
//     kdb.Mapping (int32 id | fields, strings inline). The dialect has no
//     logging timestamp, so it is lost. A record whose type has no id cannot
//     be sent: it is counted as dropped and its type is logged once.
//
// # Connections
//
// The sink connects on the first Consume. When a write fails or the peer
// closes the connection, the sink closes it and reconnects with capped
// exponential back-off (Config.BackoffMin doubling up to Config.BackoffMax;
// the first attempt after a loss is immediate). State changes are logged once
// each (connected, unreachable, lost and reconnecting, reconnected with how
// long the target was down), never per retry. Connect's outcome is its
// caller's to report and is not logged.
//
// A small goroutine per connection reads from it (the peer sends nothing in
// either protocol) only to notice at once when the peer closes, so the sink
// does not write into a connection that is already gone.
//
// # Delivery
//
// Block follows the sink's policy in serve (pipeline.Settings.Policy):
// durable, the default, sets it; best-effort leaves it unset. Replay sets
// it. The YAML key `block:` of earlier versions is ignored with a warning.
//
// With Block unset (a best-effort forward sink) the sink never holds up the
// bridge for long: records are encoded into a buffer of Config.BufferSize
// bytes that is written when full and on Flush. While the target is down,
// Consume tries to reconnect at most once per back-off interval (the dial
// runs in the background; Consume waits for a dial it started at most one
// second) and otherwise drops the batch, counts it (metrics Dropped) and
// returns an error wrapping ErrDropped. Records still in the buffer when the
// connection is lost are dropped and counted the same way. Such records may
// belong to earlier batches whose Consume already returned nil: the sink
// remembers them, and the next Flush (or Close) returns an error wrapping
// ErrDropped that counts them, then forgets them. A Consume that loses the
// connection itself reports its own batch's records. So a nil Flush means
// that every record of every batch whose Consume returned nil since the
// previous Flush was written to a connection — the bridge acknowledges
// sources' batches on that.
//
// With Block set (a durable forward sink, replay) nothing is dropped by the
// sink: Consume returns
// only once the whole batch has been written to a connection, or when ctx is
// done or the sink is closed. A batch that was partly written to a
// connection that then broke is encoded again and sent whole on the new
// connection, so the receiver may see some records twice. In this mode each
// Consume writes its batch before returning and Flush has nothing to do.
//
// Neither protocol acknowledges anything: a record written to a connection
// has reached the operating system, not the receiver. Records in flight when
// the receiver dies (in socket buffers on either side) are lost without
// notice in both modes; the sink minimises the window by not writing to a
// connection whose peer has closed it. What the sink can tell is how a
// connection ended: Close half-closes it and waits for the receiver to
// close its end after reading everything. The records written on a
// connection that the receiver closed before its stream ended, or reset
// (tracebridge's receivers reset a stream they reject), are counted as
// Stats.Unconfirmed, and Close fails with ErrDropped when that is the last
// connection: they may not have arrived.
//
// # Memory
//
// Encoding appends to one reused buffer; the hot path allocates nothing per
// record or per batch once the buffer and the connection's registry have
// grown. The sink keeps nothing of the batches it is given.
//
// # Concurrency
//
// A Sink is safe for concurrent use: Consume, Flush and Close serialise on a
// mutex (the bridge flushes from its own goroutine). A blocked Consume in
// Block mode holds the mutex while it waits for the target; Close interrupts
// its waiting and dialing (a write in progress ends within
// Config.WriteTimeout). Connected and Stats never block.
//
// Metrics: the sink reports the records it drops (metrics.Sink.Dropped); it
// does not call Consumed, which the caller timing Consume (the bridge) does.
package forward
