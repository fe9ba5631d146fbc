package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/stream"
)

// TestStalledConsumerReadAgain: a subscriber whose consumer the server
// stops delivering to while the repository holds more (as a consumer on
// a stalled replica of a clustered repository did, once in a dozen runs
// of TestClusterLiveStream beside a busy loop: a live view got nothing,
// while tail on another node had every record) reads on from where it
// was through a new consumer, and gets everything published, once.
// The stall is made by pausing the subscriber's consumer on the real
// server.
func TestStalledConsumerReadAgain(t *testing.T) {
	b := bridge(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	s, err := stream.Open(authURL(b), stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetStartSequence(1)
	var mu sync.Mutex
	got := map[int64]int{} // Before events by traceId
	s.OnEvent("BeforeOperationEvent", func(e *stream.Event) {
		id, _ := e.Field("traceId")
		mu.Lock()
		got[id.Int()]++
		mu.Unlock()
	})
	var errs []error
	s.OnError(func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	})
	s.StartAsync(ctx)
	have := func(id int64) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return got[id] > 0
		}
	}
	b.Consume(ctx, kiekerTrace("web-1", 1, 1))
	waitFor(t, 30*time.Second, "the first trace", have(1))

	// Pause the subscriber's consumer (the only one on the records'
	// stream) for an hour, then publish more.
	user, pass := b.Credentials()
	nc, err := natsgo.Connect(b.URL(), natsgo.UserInfo(user, pass))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := streammsg.Subjects{}.Stream()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(ctx)
	var paused []string
	for n := range names.Name() {
		if _, err := js.PauseConsumer(ctx, name, n, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		paused = append(paused, n)
	}
	if len(paused) != 1 {
		t.Fatalf("consumers on %s: %v, want the subscriber's one", name, paused)
	}
	b.Consume(ctx, kiekerTrace("web-2", 2, 1))
	b.Consume(ctx, kiekerTrace("web-3", 3, 1))
	waitFor(t, 60*time.Second, "the traces published while its consumer was paused", func() bool { return have(2)() && have(3)() })
	mu.Lock()
	defer mu.Unlock()
	for id, n := range got {
		if n != 1 {
			t.Errorf("trace %d: %d Before events, want 1", id, n)
		}
	}
	if len(errs) > 0 {
		t.Errorf("errors: %v", errs)
	}
}

// waitFor waits until cond holds, at most d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
