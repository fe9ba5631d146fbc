package stomp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridge"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// refusingSink refuses batches while fail is set; it keeps the order
// indexes of the records it accepted (its Flush always succeeds, so what it
// accepted is durable).
type refusingSink struct {
	fail    atomic.Bool
	refused atomic.Int64
	mu      sync.Mutex
	seen    map[int64]bool
}

func (s *refusingSink) Consume(_ context.Context, b *record.Batch) error {
	if s.fail.Load() {
		s.refused.Add(1)
		return errors.New("sink refused (test)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.Records {
		s.seen[b.Records[i].Values[2].Int()] = true
	}
	return nil
}

func (s *refusingSink) Flush() error { return nil }
func (s *refusingSink) Close() error { return nil }

// missing returns the order indexes below n not accepted yet.
func (s *refusingSink) missing(n int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m []int
	for i := range n {
		if !s.seen[int64(i)] {
			m = append(m, i)
		}
	}
	return m
}

// runBridge runs a bridge from src to sink, flushing every 50 ms (as
// servicetest.RunBridge, for a sink of the test's own).
func runBridge(t *testing.T, src bridge.Source, sink pipeline.Sink) (stop func()) {
	br := bridge.New(bridge.Settings{FlushInterval: 50 * time.Millisecond})
	br.AddSource("test", src)
	br.AddSink("sink", sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("bridge did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestRefusalAfterReconnectIsRedelivered: messages held for a batch when
// the connection is cut, and messages of the new connection after them,
// are refused by the sink; a later good batch's cumulative ACK must not
// acknowledge them. Every record is accepted eventually and nothing is left
// in the queue.
func TestRefusalAfterReconnectIsRedelivered(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := queue(t)
	proxy := servicetest.NewProxy(t, servicetest.RabbitSTOMP)
	pub := publisher(t)
	send := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := pub.Send(dest, "text/plain", fmt.Appendf(nil, "1;%d;42;%d;op();a.B", 1000+i, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	sink := &refusingSink{seen: map[int64]bool{}}
	r := newReceiver(t, Config{Name: "refuse", URL: "stomp://guest:guest@" + proxy.Addr(), Destination: dest,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Batch: broker.Config{Mapping: perlMapping(t), MaxDelay: time.Second}})
	stop := runBridge(t, r, sink)
	time.Sleep(500 * time.Millisecond) // subscribed
	send(0, 10)                        // held for a batch (MaxDelay 1 s)
	time.Sleep(200 * time.Millisecond)
	proxy.Cut() // the connection is lost with 0..9 held
	time.Sleep(300 * time.Millisecond)
	sink.fail.Store(true)
	send(10, 10) // on the new connection, with 0..9 redelivered
	deadline := time.Now().Add(10 * time.Second)
	for sink.refused.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no batch was refused")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sink.fail.Store(false)
	send(20, 10) // a later good batch
	deadline = time.Now().Add(15 * time.Second)
	for len(sink.missing(30)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the last acknowledgements
	stop()
	if m := sink.missing(30); len(m) > 0 {
		t.Errorf("records never accepted (acknowledged while refused): %v", m)
	}
	if left := drain(t, dest, 500*time.Millisecond); len(left) != 0 {
		t.Errorf("%d messages left in the queue", len(left))
	}
}
