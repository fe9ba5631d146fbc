// Package cluster makes a bridge one node of a cluster of bridges on one
// replicated NATS JetStream (docs/CLUSTER.md), as Grafana Tempo puts
// Kafka between its receivers and its block builders:
//
//   - Ingest: on any node, what the receivers decode is cut into
//     partitions (spans by trace id, every Kieker trace record into one:
//     trace.RouteKey, the rule a bridge shards its assembly by) and
//     published to the
//     stream TRACEBRIDGE_CLUSTER, one subject per partition, R=replicas,
//     file storage: a message per partition and flush, a section per
//     batch, each section with an id (a hash of its content) by which
//     owners drop client retries (and JetStream too, by message id, when
//     a message holds one section). The Publisher is a durable sink of
//     the node's engine: its Flush publishes the pending messages and
//     returns once JetStream has stored (PubAck) every message published
//     before, so a client is acknowledged only for stored data. The stream has a byte
//     limit (Options.StreamMaxBytes) and refuses beyond it: a full stream
//     fails Flush at once with ErrStreamFull (stream.go). What a Flush
//     could not have stored is kept and published again by the next,
//     and Consume waits meanwhile: sources without acknowledgements
//     back-pressure instead of losing records.
//   - Ownership: each partition has one owner at a time, holding a lease
//     in the replicated key-value bucket tb_leases (TTL LeaseTTL,
//     renewed every LeaseTTL/4). The owner reads its partition's
//     messages from the first one still in the stream, assembles their
//     traces (trace.Assembler, as a single bridge does) and appends them
//     to the store. Every CheckpointInterval it makes the store's heads
//     durable blocks in the shared bucket (Persist) and then purges from
//     the stream the messages whose records are all in those blocks: the
//     stream holds exactly what is not yet durable, and a takeover
//     resumes from there. An owner that cannot renew its lease stops
//     consuming and drops what it assembled at its deadline, LeaseTTL/4
//     before the lease can expire (its renewals stop waiting then, and
//     the owner checks the deadline itself before each fetch, so does
//     the compactor's role: a renewal that hangs fences all the same).
//     A lease records when its renewal was sent; a taker takes over a
//     lease whose renewal (and the bucket's timestamp of it) is older
//     than LeaseTTL + maxSkew by its clock, revision-checked, without
//     waiting for the bucket to remove it (takeStale).
//   - Presence: every node puts a heartbeat into tb_nodes (with a TTL),
//     which Status reads.
//
// Concurrency: a Node is safe for concurrent use. It runs one goroutine
// for leases and heartbeats (its renewals in short goroutines, one per
// lease, so that each meets its own deadline), one for checkpoints, one per owned
// partition (fetch, decode, assemble, append), plus nats.go's.
package cluster
