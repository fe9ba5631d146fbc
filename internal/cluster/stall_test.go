package cluster

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/natslogin"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestOwnerStalledConsumerReadAgain: an owner whose consumer the server
// stops delivering to while the stream holds more of its partition (as
// a consumer on a stalled replica does: the stream package's readers
// met one) reads on through a new consumer from the last message it
// took, and the old consumer is deleted at once. The stall is made by pausing
// the owner's consumer on the real server; without the owner's stall
// watch the second trace never reaches the sink.
func TestOwnerStalledConsumerReadAgain(t *testing.T) {
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sink := &fakeSink{spans: map[trace.ID]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: "t1", Partitions: 1, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
		LeaseTTL: 3 * time.Second, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	publish := func(id trace.ID) {
		t.Helper()
		b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
		for k := range 2 {
			trace.AppendSpan(b, id, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
		}
		if err := n.Publisher().Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := n.Publisher().Flush(); err != nil {
			t.Fatal(err)
		}
	}
	atSink := func(id trace.ID) func() bool {
		return func() bool {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			return sink.spans[id] == 2
		}
	}
	first, second := trace.ID{Hi: 5, Lo: 1}, trace.ID{Hi: 5, Lo: 2}
	publish(first)
	waitFor(t, "the first trace at the sink", atSink(first))

	// The owner's consumer, paused for an hour.
	js := n.JetStream()
	var paused string
	waitFor(t, "the owner's consumer", func() bool {
		names := consumerNames(ctx, t, js)
		for name := range names {
			paused = name
		}
		return len(names) == 1
	})
	if _, err := js.PauseConsumer(ctx, StreamName, paused, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	publish(second)
	waitFor(t, "the second trace at the sink", atSink(second))
	// Deleted before the new consumer was made, not at its inactive
	// threshold (30 s after its last pull).
	servicetest.WaitFor(t, 10*time.Second, "the paused consumer deleted", func() bool {
		_, there := consumerNames(ctx, t, js)[paused]
		return !there
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for id, c := range sink.spans {
		if c != 2 {
			t.Errorf("trace %v: %d spans at the sink, want 2 (once each)", id, c)
		}
	}
}

// consumerNames returns the names of the consumers of partition 0's
// owner (not the checkpoints' second readings: those read headers only).
func consumerNames(ctx context.Context, t *testing.T, js jetstream.JetStream) map[string]bool {
	t.Helper()
	st, err := js.Stream(ctx, StreamName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	l := st.ListConsumers(ctx)
	for ci := range l.Info() {
		if ci.Config.FilterSubject == Subject(0) && !ci.Config.HeadersOnly {
			out[ci.Name] = true
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOwnerReadsSkippedLastMessage: a partition's last message that the
// owner's reader passed over (as a consumer on a lagging replica was
// seen to: TestCheckpointKeepsSkippedMessage) is not left in the stream
// until a later one comes: the stall watch finds it there, after the
// last message taken, and a new consumer delivers it.
func TestOwnerReadsSkippedLastMessage(t *testing.T) {
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sink := &fakeSink{spans: map[trace.ID]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: "t1", Partitions: 1, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
		LeaseTTL: 3 * time.Second, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var mu sync.Mutex
	passed := 0
	n.lose = func(int, uint64) bool { // the first message, the first time
		mu.Lock()
		defer mu.Unlock()
		if passed == 0 {
			passed++
			return true
		}
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	id := trace.ID{Hi: 6, Lo: 1}
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
	for k := range 2 {
		trace.AppendSpan(b, id, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
	}
	if err := n.Publisher().Consume(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := n.Publisher().Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the passed-over trace at the sink", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.spans[id] == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if passed != 1 {
		t.Errorf("%d messages passed over, want 1", passed)
	}
}
