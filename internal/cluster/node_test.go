package cluster

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// fakeSink keeps the traces an owner hands on; persisted counts
// Persist's calls.
type fakeSink struct {
	mu        sync.Mutex
	spans     map[trace.ID]int
	persisted int
}

func (s *fakeSink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range ts {
		s.spans[t.ID] += len(t.Spans)
	}
	return nil
}

func (s *fakeSink) persist(context.Context) error {
	s.mu.Lock()
	s.persisted++
	s.mu.Unlock()
	return nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 60s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodePublishOwnCheckpoint: one node on an embedded server (R1):
// what its publisher stores reaches the owners, whole traces reach the
// sink, and checkpoints empty the stream; at the end the leases are
// released.
func TestNodePublishOwnCheckpoint(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sink := &fakeSink{spans: map[trace.ID]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: "t1", Partitions: 4, Replicas: 1, URL: "nats://" + srv.Addr(), User: creds.User, Password: creds.Password,
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
		LeaseTTL: 3 * time.Second, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	waitFor(t, "every partition owned", func() bool {
		st := n.Status()
		for _, p := range st.Owners {
			if p.Owner != "t1" {
				return false
			}
		}
		return len(st.Owners) == 4
	})

	// 50 traces of 3 spans, in two batches (a trace's spans in both).
	pub := n.Publisher()
	for half := range 2 {
		b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
		for i := range 50 {
			id := trace.ID{Hi: 7, Lo: uint64(i + 1)}
			for k := range 3 {
				if k%2 == half {
					trace.AppendSpan(b, id, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
				}
			}
		}
		if err := pub.Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
		// The same batch again: a client's retry, deduplicated by id.
		if err := pub.Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every trace whole at the sink", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		whole := 0
		for _, n := range sink.spans {
			if n >= 3 {
				whole++
			}
		}
		return whole == 50
	})
	sink.mu.Lock()
	for id, c := range sink.spans {
		if c != 3 {
			t.Errorf("trace %v: %d spans, want 3 (the retry was not deduplicated?)", id, c)
		}
	}
	sink.mu.Unlock()
	waitFor(t, "the stream emptied by checkpoints", func() bool {
		st := n.Status()
		return st.Stream.OK && st.Stream.Messages == 0 && st.Store.OK && !st.Store.LastCheckpoint.IsZero()
	})
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	// The leases are gone: another node takes the partitions at once.
	lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer lcancel()
	kv, err := n.JetStream().KeyValue(lctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := kv.Keys(lctx); err == nil && len(keys) > 0 {
		t.Errorf("leases left after Run: %v", keys)
	}
}
