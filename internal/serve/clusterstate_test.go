package serve

import (
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/cluster"
)

// TestStatusOfGone: a node whose heartbeat expired is listed, not
// alive, among the live ones by name; checkpoints are carried over.
func TestStatusOfGone(t *testing.T) {
	now := time.Now()
	st := statusOf(cluster.Status{Node: "n1",
		Nodes:  []cluster.NodeStatus{{Name: "n1", HTTP: "127.0.0.1:16686", Seen: now}, {Name: "n3", HTTP: "127.0.0.3:16686", Seen: now}},
		Gone:   []cluster.NodeStatus{{Name: "n2", HTTP: "127.0.0.2:16686", Seen: now.Add(-time.Minute)}},
		Owners: []cluster.PartitionStatus{{Partition: 0, Owner: "n1", Lag: 3, Checkpoint: 42}},
	}, "s3")
	if len(st.Nodes) != 3 {
		t.Fatalf("nodes %+v: want 3", st.Nodes)
	}
	for i, want := range []struct {
		name  string
		alive bool
	}{{"n1", true}, {"n2", false}, {"n3", true}} {
		if n := st.Nodes[i]; n.Name != want.name || n.Alive != want.alive {
			t.Errorf("node %d = %+v, want %s alive=%v", i, n, want.name, want.alive)
		}
	}
	if st.Nodes[1].URL != "http://127.0.0.2:16686" {
		t.Errorf("gone node's URL %q", st.Nodes[1].URL)
	}
	if p := st.Partitions[0]; p.Checkpoint != 42 || p.Lag != 3 {
		t.Errorf("partition %+v: want lag 3, checkpoint 42", p)
	}
}
