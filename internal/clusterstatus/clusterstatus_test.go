package clusterstatus

import (
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

func TestPublishLookup(t *testing.T) {
	var sh pipeline.Shared
	if Lookup(&sh) != nil {
		t.Fatal("a single node has a cluster status")
	}
	Publish(&sh, SourceFunc(func(context.Context) (Status, error) { return Status{Node: "n1"}, nil }))
	src := Lookup(&sh)
	if src == nil {
		t.Fatal("no cluster status after Publish")
	}
	st, err := src.ClusterStatus(context.Background())
	if err != nil || st.Node != "n1" {
		t.Fatalf("got %+v, %v", st, err)
	}
	Publish(&sh, nil)
	if Lookup(&sh) != nil {
		t.Fatal("a cluster status after Publish(nil)")
	}
}
