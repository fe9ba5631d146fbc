package cluster

import "time"

// Status is what a node knows of its cluster, for `tracebridge cluster
// status`, /api/v1/cluster and the console's panel. It is a snapshot: a
// plain value, safe to keep and to encode as JSON.
type Status struct {
	// Node is this node's name.
	Node string `json:"node"`
	// Partitions and Replicas are the cluster's configuration.
	Partitions int `json:"partitions"`
	Replicas   int `json:"replicas"`
	// Nodes are the nodes seen alive (their heartbeat in the nodes
	// bucket is younger than its TTL), this one included, by name.
	Nodes []NodeStatus `json:"nodes"`
	// Gone are the nodes this node saw alive whose heartbeat then
	// expired (killed, or cut off from the others), with their last
	// heartbeat, until they come back. A node that stopped (SIGTERM)
	// deleted its heartbeat and is not listed.
	Gone []NodeStatus `json:"gone,omitempty"`
	// Owners lists every partition with its owner ("" while none holds
	// its lease) and lag, in partition order.
	Owners []PartitionStatus `json:"owners"`
	// Stream is the replicated stream's health, Store the shared store's
	// as this node sees it.
	Stream StreamStatus `json:"stream"`
	Store  StoreStatus  `json:"store"`
	// Degraded lists what is wrong, one sentence each (empty: healthy).
	Degraded []string `json:"degraded,omitempty"`
	// At is when the snapshot was taken.
	At time.Time `json:"at"`
}

// NodeStatus is one node as its heartbeat describes it.
type NodeStatus struct {
	Name string `json:"name"`
	// HTTP is the node's API address ("" without an http: listener).
	HTTP string `json:"http,omitempty"`
	// NATS is its embedded NATS server's client address ("" with an
	// external NATS cluster).
	NATS string `json:"nats,omitempty"`
	// Owned is how many partitions it owns.
	Owned int `json:"owned"`
	// Started is when the node started; Seen its last heartbeat.
	Started time.Time `json:"started"`
	Seen    time.Time `json:"seen"`
}

// PartitionStatus is one partition: who owns it and what waits.
type PartitionStatus struct {
	Partition int `json:"partition"`
	// Owner is the node holding the partition's lease ("" when none
	// does: a takeover is due).
	Owner string `json:"owner"`
	// Lag is the partition's messages in the stream not yet checkpointed
	// (in blocks of the shared store and removed from the stream).
	Lag uint64 `json:"lag"`
	// Checkpoint is the stream sequence up to which the owner has put
	// the partition into blocks and removed it from the stream (0 until
	// its owner's first checkpoint of messages; another node's as of its
	// last lease renewal).
	Checkpoint uint64 `json:"checkpoint"`
	// Since is when the owner took the lease (zero when unowned).
	Since time.Time `json:"since,omitzero"`
}

// StreamStatus is the JetStream stream's health.
type StreamStatus struct {
	// Name of the stream; OK says whether this node reaches it (its
	// info answered).
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Error is why not ("" when OK).
	Error string `json:"error,omitempty"`
	// Messages and Bytes in the stream: everything not yet checkpointed.
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// MaxBytes is the stream's byte limit (0: none); Full says that it
	// is reached (95 % of it, or this node's publishes were refused in
	// the last two checkpoint intervals): publishers are refused.
	MaxBytes uint64 `json:"max_bytes,omitempty"`
	Full     bool   `json:"full,omitempty"`
	// FullRefusals counts this node's messages the full stream refused.
	FullRefusals int64 `json:"full_refusals,omitempty"`
	// Leader is the server leading the stream's Raft group; Replicas the
	// others, with whether each is current.
	Leader   string          `json:"leader,omitempty"`
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
	// PublishErrors counts this node's publishes that failed (each one
	// a client not acknowledged, retried or answered busy).
	PublishErrors int64 `json:"publish_errors"`
}

// ReplicaStatus is one replica of the stream.
type ReplicaStatus struct {
	Name    string        `json:"name"`
	Current bool          `json:"current"`
	Offline bool          `json:"offline,omitempty"`
	Lag     uint64        `json:"lag,omitempty"`
	Active  time.Duration `json:"active_ns,omitempty"`
}

// StoreStatus is the shared store's health as this node sees it.
type StoreStatus struct {
	// OK is false while this node's last checkpoint failed to make its
	// blocks durable (the bucket unreachable, say); Error says why.
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// LastCheckpoint is when this node last checkpointed its partitions.
	LastCheckpoint time.Time `json:"last_checkpoint,omitzero"`
}
