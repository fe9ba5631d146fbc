package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	sink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/stream"
)

// TestClusterWriters: two cluster nodes' stream sinks write one
// repository, each numbering types in its own order and counting its
// own subjects; a reader decodes every record with its node's metadata,
// names the node, sees no gap (each node's subject counts apart), and
// Metadata joins both nodes'.
func TestClusterWriters(t *testing.T) {
	srv, err := natsd.Start(natsd.Config{StoreDir: t.TempDir(), CredentialsFile: t.TempDir() + "/credentials"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	node := func(name string) *sink.Sink {
		b, err := sink.New(&sink.Config{Cluster: &sink.ClusterTarget{Node: name, Server: srv}},
			pipeline.Settings{DataDir: t.TempDir(), Shared: &pipeline.Shared{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b := node("a"), node("b")
	url := authURL(a)
	s, err := stream.Open(url, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The nodes set their streams up on their own goroutines: wait for
	// both nodes' metadata.
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := s.Metadata(context.Background())
		if err == nil && len(md.Nodes) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes' metadata: %v %v", md, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Node b sees AfterOperationEvent first: its type ids differ from a's.
	first := &record.Batch{Origin: record.Origin{Receiver: "t", Host: "web-1"}}
	one := kiekerTrace("web-1", 9, 1)
	first.Records = append(first.Records, one.Records[2])
	b.Consume(context.Background(), first)
	a.Consume(context.Background(), kiekerTrace("web-1", 1, 50))
	b.Consume(context.Background(), kiekerTrace("web-1", 2, 50))
	a.Consume(context.Background(), kiekerTrace("web-1", 3, 50))

	var mu sync.Mutex
	got := map[[2]string]int{}
	var gaps []stream.Gap
	s.SetStartSequence(1)
	s.OnEvent("", func(e *stream.Event) {
		mu.Lock()
		got[[2]string{e.Node, e.Type.Name}]++
		mu.Unlock()
	})
	s.OnGap(func(g stream.Gap) { mu.Lock(); gaps = append(gaps, g); mu.Unlock() })
	s.OnError(func(err error) { t.Errorf("stream: %v", err) })
	s.StartAsync(context.Background())
	want := map[[2]string]int{
		{"a", record.TraceMetadata}: 2, {"a", record.BeforeOperationEvent}: 100, {"a", record.AfterOperationEvent}: 100,
		{"b", record.TraceMetadata}: 1, {"b", record.BeforeOperationEvent}: 50, {"b", record.AfterOperationEvent}: 51,
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, v := range got {
			n += v
		}
		done := n >= 304
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("node %s, %s: %d records, want %d", k[0], k[1], got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("records of %v, want %v", got, want)
	}
	if len(gaps) > 0 {
		t.Errorf("gaps reported: %+v", gaps)
	}
}
