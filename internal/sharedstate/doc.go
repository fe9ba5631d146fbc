// Package sharedstate replicates a cluster node's shared state through
// NATS JetStream key-value buckets, so that a change made on one node
// applies on all: the host table and its secrets (internal/hostdb, bucket
// tracebridge_hosts) and the control settings (internal/control: types
// and hosts switched off, sampling; bucket tracebridge_control). Types
// (StartTypes, bucket tracebridge_types) is the cluster's record-type
// registry: one id per record type name, the same on every node, for
// records that cross the wire between nodes.
//
// Each node keeps its own copy (the host table in <data_dir>/hosts, the
// control state file), so receivers and stages read locally and a node
// cut off from NATS goes on with what it had. Start binds the buckets
// (creating them with the cluster's replication factor), brings the local
// copy to the bucket's state, then, until its context ends, watches the
// bucket and applies what other nodes write, and writes what changes
// locally (the HTTP API's /api/v1/hosts, a host created by its data,
// `tracebridge control` through the stream) to the bucket.
//
// Conflict rules (docs/CLUSTER.md, "Shared state"):
//
//   - The bucket is the cluster's truth. At start a node takes every
//     record and setting the bucket holds; a host the bucket lists as
//     deleted is deleted locally; a host the bucket never had is added to
//     it (the node's table seeds the cluster). Control settings: the
//     first node to start seeds the bucket with its settings (key
//     "seeded"); every later node takes the bucket's.
//   - A host record is written with the bucket revision it was based on
//     (compare and swap): when two nodes change the same host at once,
//     the change that reaches the bucket first wins whole, the other node
//     takes it and logs that its own change was overruled. A host's last
//     contact is not replicated (each node knows when it heard from it).
//   - Control settings are one key per setting (a type off, a host off, a
//     type's sampling rate): the last write of a setting wins; changes of
//     different settings never conflict. Probe commands are not
//     replicated: they go to the monitored programs a node is configured
//     with.
//   - A change that cannot be written (NATS unreachable) is retried every
//     RetryInterval; if the bucket moved on meanwhile, the bucket wins.
//   - Record-type ids are given first come, first served: a node creates
//     "id.N" for the least id it does not know to be taken, then
//     "name.<name>" with N; both keys are create-only, so the first node
//     to create the name's key decides its id everywhere, and an id
//     names one type for the life of the bucket.
//
// Concurrency: Start runs one goroutine per bucket, which both applies
// what it watches and writes local changes, so the two never race; the
// host table's and the controller's change hooks only queue names.
package sharedstate
