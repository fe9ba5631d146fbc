package api

import (
	"context"
	"net/http"

	"github.com/tracebridge/tracebridge/internal/clusterstatus"
)

// Cluster is what the API asks of a cluster node: the status of its
// cluster (internal/cluster implements it).
type Cluster interface {
	ClusterStatus(ctx context.Context) (clusterstatus.Status, error)
}

// errNotCluster answers /api/v1/cluster on a bridge that runs alone.
var errNotCluster = errorf(http.StatusNotFound, "not a cluster node: this bridge runs alone (its configuration has no cluster: section; docs/CLUSTER.md)")

// cluster returns the node's cluster: Options.Cluster, else the one the
// cluster published in Shared (nil when the bridge runs alone).
func (a *API) cluster() Cluster {
	if a.opt.Cluster != nil {
		return a.opt.Cluster
	}
	if src := clusterstatus.Lookup(a.opt.Shared); src != nil {
		return src
	}
	return nil
}

// clusterStatus answers GET /api/v1/cluster: 404 on a single node, 503
// when the node cannot tell (its status says why), else the status, with
// empty lists rather than nulls.
func clusterStatus(c *call) error {
	cl := c.a.cluster()
	if cl == nil {
		return errNotCluster
	}
	st, err := cl.ClusterStatus(c.ctx)
	if err != nil {
		return errorf(http.StatusServiceUnavailable, "cluster status: %v", err)
	}
	if st.Nodes == nil {
		st.Nodes = []clusterstatus.Node{}
	}
	if st.Partitions == nil {
		st.Partitions = []clusterstatus.Partition{}
	}
	if st.Degraded == nil {
		st.Degraded = []string{}
	}
	return c.json(st)
}
