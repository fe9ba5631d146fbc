package stream_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	sink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/stream"
)

// TestStalledConsumerReadAgain: a subscriber whose consumer the server
// stops delivering to while the repository holds more (as a consumer on
// a stalled replica of a clustered repository did, once in a dozen runs
// of TestClusterLiveStream beside a busy loop: a live view got nothing,
// while tail on another node had every record) reads on from where it
// was through a new consumer, and gets everything published, once. The
// stall is made by pausing the subscriber's consumer on the real server:
// after it read a first trace from the repository's start, and, for a
// subscriber that follows live, before it read anything (the new
// consumer must not begin before the first one did).
func TestStalledConsumerReadAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		live   bool    // follow live (from the repository's end), not from sequence 1
		before []int64 // traces published before the stall (read, or before a live start)
	}{
		{"after reading", false, []int64{1}},
		{"live, before reading", true, []int64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bridge(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.live {
				for _, id := range tc.before {
					b.Consume(ctx, kiekerTrace("web-1", id, 1))
				}
				waitStored(t, authURL(b), 3*len(tc.before))
			}

			js := repository(t, b)
			name := streammsg.Subjects{}.Stream()
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			others := consumers(t, ctx, st) // waitStored's readers'

			s, err := stream.Open(authURL(b), stream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !tc.live {
				s.SetStartSequence(1)
			}
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
			ready := make(chan struct{})
			var once sync.Once
			s.OnMetadata(func(*stream.Metadata) { once.Do(func() { close(ready) }) })
			s.StartAsync(ctx)
			have := func(ids ...int64) func() bool {
				return func() bool {
					mu.Lock()
					defer mu.Unlock()
					for _, id := range ids {
						if got[id] == 0 {
							return false
						}
					}
					return true
				}
			}
			if tc.live {
				select { // the consumer exists once the metadata came
				case <-ready:
				case <-time.After(30 * time.Second):
					t.Fatal("no metadata after 30s")
				}
			} else {
				for _, id := range tc.before {
					b.Consume(ctx, kiekerTrace("web-1", id, 1))
				}
				waitFor(t, 30*time.Second, "the first traces", have(tc.before...))
			}

			// Pause the subscriber's consumer (the one made since it
			// started) for an hour, then publish more.
			var paused []string
			for _, n := range consumers(t, ctx, st) {
				if !slices.Contains(others, n) {
					if _, err := js.PauseConsumer(ctx, name, n, time.Now().Add(time.Hour)); err != nil {
						t.Fatal(err)
					}
					paused = append(paused, n)
				}
			}
			if len(paused) != 1 {
				t.Fatalf("consumers made on %s since the subscriber started: %v, want its one", name, paused)
			}
			b.Consume(ctx, kiekerTrace("web-2", 2, 1))
			b.Consume(ctx, kiekerTrace("web-3", 3, 1))
			waitFor(t, 60*time.Second, "the traces published while its consumer was paused", have(2, 3))
			// The stalled consumer is gone (deleted, not left to its
			// inactive threshold).
			waitFor(t, 30*time.Second, "the stalled consumer deleted", func() bool {
				_, err := st.Consumer(ctx, paused[0])
				return errors.Is(err, jetstream.ErrConsumerNotFound)
			})
			mu.Lock()
			defer mu.Unlock()
			want := map[int64]int{2: 1, 3: 1}
			if !tc.live {
				for _, id := range tc.before {
					want[id] = 1
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("Before events by traceId: %v, want %v", got, want)
			}
			if len(errs) > 0 {
				t.Errorf("errors: %v", errs)
			}
		})
	}
}

// repository connects to the bridge's embedded NATS server as its
// readers do, until the test ends.
func repository(t *testing.T, b *sink.Sink) jetstream.JetStream {
	t.Helper()
	user, pass := b.Credentials()
	nc, err := natsgo.Connect(b.URL(), natsgo.UserInfo(user, pass))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// consumers lists the names of the consumers on st.
func consumers(t *testing.T, ctx context.Context, st jetstream.Stream) []string {
	t.Helper()
	names := st.ConsumerNames(ctx)
	var out []string
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor waits until cond holds, at most d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	servicetest.WaitFor(t, d, what, cond)
}
