package mqtt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

func mapping(t testing.TB) *kdb.Mapping {
	m, err := kdb.DefaultMapping(record.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func event(i int) []byte { return fmt.Appendf(nil, "1;%d;7;%d;op();a.B", 1000+i, i) }

func publish(t *testing.T, addr, topic string, from, n int) {
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(fmt.Sprintf("pub-%d", rand.Int64())))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	for i := from; i < from+n; i++ {
		if tok := c.Publish(topic, 1, false, event(i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
}

func newReceiver(t *testing.T, addr, topic, id string) *Receiver {
	r, err := New(Config{Name: "mqtt", URL: "mqtt://" + addr, Topic: topic, ClientID: id, BackoffMax: time.Second, Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMosquitto: the machine's Mosquitto; with a persistent session, what
// is published while the receiver is stopped arrives when it comes back.
func TestMosquitto(t *testing.T) {
	servicetest.Require(t, servicetest.Mosquitto, "Mosquitto")
	topic := fmt.Sprintf("tracebridge/test/%d", rand.Int64())
	id := fmt.Sprintf("tb-test-%d", rand.Int64())
	forgetSession(t, servicetest.Mosquitto, id)
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, newReceiver(t, servicetest.Mosquitto, topic, id), sink)
	time.Sleep(300 * time.Millisecond) // subscribed
	publish(t, servicetest.Mosquitto, topic, 0, 300)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 300, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	stop()
	publish(t, servicetest.Mosquitto, topic, 300, 200) // while stopped
	sink = &servicetest.Collector{}
	stop = servicetest.RunBridge(t, newReceiver(t, servicetest.Mosquitto, topic, id), sink)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 200, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	stop()
	if sink.Records()[0].Values[2].Int() != 300 {
		t.Fatalf("after the restart the first record is %d, want 300", sink.Records()[0].Values[2].Int())
	}
}

// TestMosquittoRestart restarts a private mosquitto during a stream, after
// everything received was acknowledged.
func TestMosquittoRestart(t *testing.T) {
	m := startMosquitto(t, "")
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, newReceiver(t, m.addr, "kieker/tools/bridge", "tb-restart"), sink)
	time.Sleep(300 * time.Millisecond)
	publish(t, m.addr, "kieker/tools/bridge", 0, 200)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 200, 30*time.Second)
	m.stop(false)
	m.start()
	time.Sleep(1500 * time.Millisecond) // the receiver reconnects (back-off ≤ 1 s)
	publish(t, m.addr, "kieker/tools/bridge", 200, 200)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 400, 30*time.Second)
	stop()
}

func TestConfigErrors(t *testing.T) {
	for _, u := range []string{"", "http://x", "mqtt://"} {
		if _, err := New(Config{URL: u}, broker.Settings{}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	r, _ := New(Config{URL: "mqtt://u:secret@h"}, broker.Settings{})
	if strings.Contains(r.Target(), "secret") || r.Target() != "mqtt://h:1883 kieker/tools/bridge" {
		t.Fatalf("target %q", r.Target())
	}
}

// gatedSink counts how often it consumed each order index; its Flush blocks
// until the gate opens, so nothing it consumed is acknowledged before.
type gatedSink struct {
	gate    chan struct{}
	mu      sync.Mutex
	counts  map[int64]int
	flushes atomic.Int64
}

func (s *gatedSink) Consume(_ context.Context, b *record.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.Records {
		s.counts[b.Records[i].Values[2].Int()]++
	}
	return nil
}

func (s *gatedSink) Flush() error { <-s.gate; s.flushes.Add(1); return nil }
func (s *gatedSink) Close() error { return s.Flush() }

// waitFor waits until every order index in [from, to) was consumed at
// least times times.
func (s *gatedSink) waitFor(t *testing.T, from, to, times int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		short := 0
		for i := from; i < to; i++ {
			if s.counts[int64(i)] < times {
				short++
			}
		}
		s.mu.Unlock()
		if short == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the records %d..%d consumed fewer than %d times within %v", short, from, to-1, times, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMosquittoRestartWithMessagesInFlight: the broker restarts (with
// persistence) while the receiver holds messages it has not acknowledged,
// because the sink has not made them durable yet. The broker delivers them
// again after the restart; once the sink flushes, everything is
// acknowledged and nothing is left in the session. The broker stops
// gracefully (SIGTERM: it saves its state) or crashes (SIGKILL, after
// saving on every change).
func TestMosquittoRestartWithMessagesInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		conf     string
		graceful bool
	}{
		{"graceful", "", true},
		{"crash", "autosave_interval 1\nautosave_on_changes true\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) { restartInFlight(t, tc.conf, tc.graceful) })
	}
}

func restartInFlight(t *testing.T, conf string, graceful bool) {
	m := startMosquitto(t, conf)
	const topic, id = "kieker/tools/bridge", "tb-inflight"
	sink := &gatedSink{gate: make(chan struct{}), counts: map[int64]int{}}
	r, err := New(Config{Name: "mqtt", URL: "mqtt://" + m.addr, Topic: topic, ClientID: id, BackoffMax: time.Second,
		Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	stop := servicetest.RunBridge(t, r, sink)
	var open sync.Once
	openGate := func() { open.Do(func() { close(sink.gate) }) }
	t.Cleanup(openGate)                // before stop (cleanups run last first)
	time.Sleep(300 * time.Millisecond) // subscribed
	// Mosquitto sends 20 messages (max_inflight_messages) and queues the
	// rest until some are acknowledged.
	publish(t, m.addr, topic, 0, 100)
	sink.waitFor(t, 0, DefaultInflight, 1, 20*time.Second) // consumed, not acknowledged
	if !graceful {
		time.Sleep(1500 * time.Millisecond) // autosaved, at most a second after the change
	}
	m.stop(graceful) // with the session and its in-flight messages saved
	m.start()
	sink.waitFor(t, 0, DefaultInflight, 2, 20*time.Second) // delivered again
	openGate()
	publish(t, m.addr, topic, 100, 100)
	sink.waitFor(t, 0, 200, 1, 20*time.Second)
	// The last acknowledgements: they follow the flush after the last
	// record (two flushes on, the first may have begun before it).
	for f := sink.flushes.Load(); sink.flushes.Load() < f+2; {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	stop()

	// Everything was acknowledged: the session has nothing left to deliver.
	left := &servicetest.Collector{}
	stop2 := servicetest.RunBridge(t, newReceiver(t, m.addr, topic, id), left)
	time.Sleep(1500 * time.Millisecond)
	stop2()
	if n := left.Len(); n != 0 {
		t.Fatalf("%d records delivered again after everything was acknowledged", n)
	}
}
