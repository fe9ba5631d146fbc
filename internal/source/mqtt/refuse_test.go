package mqtt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/bridge"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// refusingSink refuses batches while fail is set and keeps the order
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

// missing returns the order indexes in [from, to) not accepted yet.
func (s *refusingSink) missing(from, to int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m []int
	for i := from; i < to; i++ {
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

// forgetSession removes a persistent session from the broker when the test
// ends, so test runs do not pile up sessions on the machine's Mosquitto.
func forgetSession(t testing.TB, addr, id string) {
	t.Cleanup(func() {
		c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetCleanSession(true))
		if tok := c.Connect(); tok.WaitTimeout(5*time.Second) && tok.Error() == nil {
			c.Disconnect(100)
		}
	})
}

// TestRefusedMessagesRedelivered: the sink refuses more messages than the
// broker's in-flight window (Mosquitto's default 20); MQTT has no negative
// acknowledgement, so the receiver reconnects to have them delivered again.
// Once the sink recovers, the refused messages and later ones all arrive.
func TestRefusedMessagesRedelivered(t *testing.T) {
	servicetest.Require(t, servicetest.Mosquitto, "Mosquitto")
	for _, refused := range []int{10, 40} {
		t.Run(fmt.Sprint(refused), func(t *testing.T) {
			running := goleak.IgnoreCurrent()
			id := fmt.Sprintf("tb-refuse-%d", rand.Int64())
			topic := "tracebridge/test/" + id
			forgetSession(t, servicetest.Mosquitto, id)
			sink := &refusingSink{seen: map[int64]bool{}}
			r, err := New(Config{Name: "mqtt", URL: "mqtt://" + servicetest.Mosquitto, Topic: topic, ClientID: id,
				BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
			if err != nil {
				t.Fatal(err)
			}
			stop := runBridge(t, r, sink)
			time.Sleep(300 * time.Millisecond) // subscribed
			sink.fail.Store(true)
			publish(t, servicetest.Mosquitto, topic, 0, refused)
			deadline := time.Now().Add(10 * time.Second)
			for sink.refused.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("nothing was refused")
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			sink.fail.Store(false) // the sink recovers
			publish(t, servicetest.Mosquitto, topic, 100, 40)
			deadline = time.Now().Add(15 * time.Second)
			for len(sink.missing(0, refused))+len(sink.missing(100, 140)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			stop()
			if m := sink.missing(0, refused); len(m) > 0 {
				t.Errorf("refused messages never delivered again: %v", m)
			}
			if m := sink.missing(100, 140); len(m) > 0 {
				t.Errorf("later messages never delivered: %v", m)
			}
			// The clients abandoned for reconnecting are gone.
			// (paho's goroutines of an abandoned client may take up to its
			// 2 s write timeout to end)
			err = goleak.Find(running)
			for end := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(end); err = goleak.Find(running) {
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
}
