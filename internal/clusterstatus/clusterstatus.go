// Package clusterstatus is what a cluster node says of its cluster: the
// nodes, who owns which partition and how far behind it is, the health of
// the replicated stream and of the shared store, and what is degraded
// (Status). The cluster (internal/cluster) fills it in; the HTTP API
// (GET /api/v1/cluster), `tracebridge cluster status` and the web UI's
// console read it. It imports nothing of the bridge but pipeline.Shared,
// through which the cluster publishes its Source (Publish, Lookup), so
// the API may import it.
//
// Concurrency: Publish and Lookup may be called from any goroutine; a
// Source's ClusterStatus must be safe for concurrent use (the API calls it
// per request).
package clusterstatus

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Status is a cluster as one node sees it.
type Status struct {
	// Node is the name of the node that answers.
	Node string `json:"node"`
	// Nodes are every node the cluster knows, alive or not, by name.
	Nodes []Node `json:"nodes"`
	// Partitions are every partition, by id.
	Partitions []Partition `json:"partitions"`
	Stream     Stream      `json:"stream"`
	Store      Store       `json:"store"`
	// Degraded says, one line each, what is not as it should be (a node
	// gone, a partition without owner, a stream without quorum, the store
	// unreachable); empty when all is well.
	Degraded []string `json:"degraded"`
}

// Node is a member of the cluster.
type Node struct {
	Name string `json:"name"`
	// URL is the node's HTTP API (http://HOST:PORT), "" when unknown.
	URL   string `json:"url"`
	Alive bool   `json:"alive"`
	// LastSeen is when the node last announced itself.
	LastSeen time.Time `json:"last_seen"`
}

// Partition is one partition of the ingest stream.
type Partition struct {
	ID int `json:"id"`
	// Owner is the node holding the partition's lease ("" when none).
	Owner string `json:"owner"`
	// Lag is how many of the partition's messages are not yet in blocks
	// (stored in the stream, not yet acknowledged by the owner).
	Lag uint64 `json:"lag"`
	// Checkpoint is the stream sequence up to which the partition is in
	// blocks.
	Checkpoint uint64 `json:"checkpoint"`
}

// Stream is the replicated JetStream stream ingest goes through.
type Stream struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Leader is the NATS server leading the stream's Raft group.
	Leader   string `json:"leader"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// MaxBytes is the stream's byte limit (stream_max_bytes; 0: none);
	// Full says it is reached: publishers are refused (clients answered
	// busy) until checkpoints catch up.
	MaxBytes uint64 `json:"max_bytes"`
	Full     bool   `json:"full"`
	Healthy  bool   `json:"healthy"`
	Error    string `json:"error,omitempty"`
}

// Store is the shared block store.
type Store struct {
	// Backend is s3 or local.
	Backend string `json:"backend"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// Source gives the cluster's status (internal/cluster implements it).
type Source interface {
	ClusterStatus(ctx context.Context) (Status, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context) (Status, error)

// ClusterStatus calls f.
func (f SourceFunc) ClusterStatus(ctx context.Context) (Status, error) { return f(ctx) }

type sharedKey struct{}

// holder lets Publish replace what Lookup returns.
type holder struct{ src atomic.Pointer[Source] }

func lookupHolder(sh *pipeline.Shared) *holder {
	return sh.Value(sharedKey{}, func() any { return &holder{} }).(*holder)
}

// Publish makes src the bridge's cluster status (nil: the bridge is no
// longer a cluster node).
func Publish(sh *pipeline.Shared, src Source) {
	if src == nil {
		lookupHolder(sh).src.Store(nil)
		return
	}
	lookupHolder(sh).src.Store(&src)
}

// Lookup returns the bridge's cluster status, nil on a single node.
func Lookup(sh *pipeline.Shared) Source {
	h, _ := sh.Value(sharedKey{}, nil).(*holder)
	if h == nil {
		return nil
	}
	if p := h.src.Load(); p != nil {
		return *p
	}
	return nil
}
