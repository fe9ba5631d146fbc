package serve

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/cluster"
	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/sharedstate"
)

// statusOf is a cluster node's status as the API, the CLI and the UI
// read it (internal/clusterstatus).
func statusOf(s cluster.Status, backend string) clusterstatus.Status {
	out := clusterstatus.Status{Node: s.Node, Degraded: s.Degraded,
		Stream: clusterstatus.Stream{Name: s.Stream.Name, Replicas: s.Replicas, Leader: s.Stream.Leader,
			Messages: s.Stream.Messages, Bytes: s.Stream.Bytes, MaxBytes: s.Stream.MaxBytes, Full: s.Stream.Full,
			Healthy: s.Stream.OK, Error: s.Stream.Error},
		Store: clusterstatus.Store{Backend: backend, Healthy: s.Store.OK, Error: s.Store.Error}}
	for _, n := range s.Nodes { // the nodes whose heartbeat is alive
		u := ""
		if n.HTTP != "" {
			u = "http://" + n.HTTP
		}
		out.Nodes = append(out.Nodes, clusterstatus.Node{Name: n.Name, URL: u, Alive: true, LastSeen: n.Seen})
	}
	for _, n := range s.Gone { // seen alive, then their heartbeat expired
		u := ""
		if n.HTTP != "" {
			u = "http://" + n.HTTP
		}
		out.Nodes = append(out.Nodes, clusterstatus.Node{Name: n.Name, URL: u, LastSeen: n.Seen})
	}
	slices.SortFunc(out.Nodes, func(a, b clusterstatus.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range s.Owners {
		out.Partitions = append(out.Partitions, clusterstatus.Partition{ID: p.Partition, Owner: p.Owner, Lag: p.Lag, Checkpoint: p.Checkpoint})
	}
	return out
}

// runClusterState publishes the node's status for the API and
// replicates the bridge's shared state (host table, control settings)
// through the node's JetStream until ctx ends (it tries again while
// JetStream has no quorum yet).
func (s *Server) runClusterState(ctx context.Context, node *cluster.Node, name string, replicas int, backend string) {
	src := clusterstatus.Source(clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) {
		return statusOf(node.Status(), backend), nil
	}))
	clusterstatus.Publish(s.Shared, src)
	go func() {
		// Logged once, and once more when it works: a node cut off from
		// the quorum fails every second.
		failures := 0
		for ctx.Err() == nil {
			sync, err := sharedstate.StartShared(ctx, node.JetStream(), name, s.Shared, s.base.Logger, replicas)
			if err == nil {
				if failures > 0 {
					s.base.Logger.Info("cluster: shared state replicated", "node", name, "after_failures", failures)
				}
				if sync != nil {
					clusterstatus.Publish(s.Shared, sync.Status(src))
				}
				return
			}
			if failures++; failures == 1 {
				s.base.Logger.Warn("cluster: shared state not replicated yet; trying again every second", "node", name, "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}
