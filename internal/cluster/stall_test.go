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

// oneOwner is a node owning the only partition on an embedded server,
// with the test's lose hook (nil: none), running until the test ends:
// publish sends a trace of two spans through its publisher, at(id) says
// whether the sink has that trace's two spans.
type oneOwner struct {
	n    *Node
	sink *fakeSink
	ctx  context.Context
}

func startOneOwner(t *testing.T, lose func(p int, seq uint64) bool) *oneOwner {
	t.Helper()
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	sink := &fakeSink{spans: map[trace.ID]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: "t1", Partitions: 1, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
		LeaseTTL: 3 * time.Second, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n.lose = lose
	ctx := runUntilEnd(t, n)
	return &oneOwner{n: n, sink: sink, ctx: ctx}
}

func (o *oneOwner) publish(t *testing.T, id trace.ID) {
	t.Helper()
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
	for k := range 2 {
		trace.AppendSpan(b, id, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
	}
	if err := o.n.Publisher().Consume(o.ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := o.n.Publisher().Flush(); err != nil {
		t.Fatal(err)
	}
}

func (o *oneOwner) at(id trace.ID) func() bool {
	return func() bool {
		o.sink.mu.Lock()
		defer o.sink.mu.Unlock()
		return o.sink.spans[id] == 2
	}
}

// TestOwnerStalledConsumerReadAgain: an owner whose consumer the server
// stops delivering to while the stream holds more of its partition (as
// a consumer on a stalled replica does: the stream package's readers
// met one) reads on through a new consumer from the last message it
// took, and the old consumer is deleted at once. The stall is made by
// pausing the owner's consumer on the real server; without the owner's
// stall watch the second trace never reaches the sink.
func TestOwnerStalledConsumerReadAgain(t *testing.T) {
	o := startOneOwner(t, nil)
	first, second := trace.ID{Hi: 5, Lo: 1}, trace.ID{Hi: 5, Lo: 2}
	o.publish(t, first)
	waitFor(t, "the first trace at the sink", o.at(first))

	// The owner's consumer, paused for an hour.
	js := o.n.JetStream()
	var paused string
	waitFor(t, "the owner's consumer", func() bool {
		names := consumerNames(o.ctx, t, js)
		for name := range names {
			paused = name
		}
		return len(names) == 1
	})
	if _, err := js.PauseConsumer(o.ctx, StreamName, paused, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	o.publish(t, second)
	waitFor(t, "the second trace at the sink", o.at(second))
	// Deleted before the new consumer was made, not at its inactive
	// threshold (30 s after its last pull).
	servicetest.WaitFor(t, 10*time.Second, "the paused consumer deleted", func() bool {
		_, there := consumerNames(o.ctx, t, js)[paused]
		return !there
	})
	o.sink.mu.Lock()
	defer o.sink.mu.Unlock()
	for id, c := range o.sink.spans {
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
	var mu sync.Mutex
	passed := 0
	o := startOneOwner(t, func(int, uint64) bool { // the first message, the first time
		mu.Lock()
		defer mu.Unlock()
		if passed == 0 {
			passed++
			return true
		}
		return false
	})
	id := trace.ID{Hi: 6, Lo: 1}
	o.publish(t, id)
	waitFor(t, "the passed-over trace at the sink", o.at(id))
	mu.Lock()
	defer mu.Unlock()
	if passed != 1 {
		t.Errorf("%d messages passed over, want 1", passed)
	}
}
