package mqtt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// burst publishes n QoS 1 messages to addr as fast as the broker takes them
// while a bridge (flushing every 50 ms, acknowledging after at most
// ackInterval) runs a receiver with the given in-flight window; it returns
// how many distinct records arrived and how long the publishing and the
// receiving took (until the last record that arrived).
func burst(t testing.TB, addr string, n, inflight int, ackInterval time.Duration) (got int, pub, recv time.Duration) {
	id := fmt.Sprintf("tb-burst-%d", rand.Int64())
	topic := "tracebridge/test/" + id
	forgetSession(t, addr, id)
	persistentSession(t, addr, id, topic) // subscribed before the burst
	r, err := New(Config{Name: "mqtt", URL: "mqtt://" + addr, Topic: topic, ClientID: id, Inflight: inflight,
		Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	sink := &servicetest.Collector{}
	br := engine.New(engine.Settings{FlushInterval: 50 * time.Millisecond, AckInterval: ackInterval})
	br.AddSource("mqtt", r)
	br.AddSink("collector", sink)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { br.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id + "-pub"))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	start := time.Now()
	toks := make([]paho.Token, 0, n)
	for i := range n {
		toks = append(toks, c.Publish(topic, 1, false, event(i)))
	}
	for _, tk := range toks {
		if !tk.WaitTimeout(30*time.Second) || tk.Error() != nil {
			t.Fatalf("publish: %v", tk.Error())
		}
	}
	pub = time.Since(start)
	last, lastChange := -1, time.Now()
	for {
		k := sink.Distinct(servicetest.ByOrderIndex)
		if k >= n {
			break
		}
		if k != last {
			last, lastChange = k, time.Now()
		} else if time.Since(lastChange) > 3*time.Second {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if last >= n || last < 0 {
		lastChange = time.Now()
	}
	return sink.Distinct(servicetest.ByOrderIndex), pub, lastChange.Sub(start)
}

// TestBurstWithBrokerLimitsRaised: a burst of 5000 QoS 1 messages,
// published faster than the receiver acknowledges, arrives completely when
// Mosquitto may hand the receiver more messages at once
// (max_inflight_messages) or queue more for it (max_queued_messages). With
// the defaults (20 and 1000) most of such a burst is dropped by the broker
// (see the package documentation and BenchmarkMosquittoDrain).
func TestBurstWithBrokerLimitsRaised(t *testing.T) {
	for _, tc := range []struct {
		name     string
		conf     string
		inflight int
	}{
		{"max_inflight_messages", "max_inflight_messages 10000\n", 10000},
		{"max_queued_messages", "max_queued_messages 10000\nmax_queued_bytes 100000000\n", DefaultInflight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMosquitto(t, tc.conf)
			const n = 5000
			got, pub, recv := burst(t, m.addr, n, tc.inflight, 20*time.Millisecond)
			t.Logf("%d of %d arrived; published in %v, received in %v", got, n, pub.Round(time.Millisecond), recv.Round(time.Millisecond))
			if got != n {
				t.Fatalf("%d of %d messages arrived", got, n)
			}
		})
	}
}

// BenchmarkMosquittoDrain measures how fast the receiver takes 1000 QoS 1
// messages queued at a private Mosquitto with its default limits, the
// bridge acknowledging within 20 ms, with the in-flight window (Inflight
// 20, the default) and without (-1).
func BenchmarkMosquittoDrain(b *testing.B) {
	for _, inflight := range []int{-1, DefaultInflight} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			m := startMosquitto(b, "")
			const n = 1000
			// No SetBytes: an iteration's time is mostly the session's
			// set-up; msgs/s is measured over the receiving only.
			b.ReportAllocs()
			var total time.Duration
			for range b.N {
				got, _, recv := burst(b, m.addr, n, inflight, 20*time.Millisecond)
				if got != n {
					b.Fatalf("%d of %d arrived", got, n)
				}
				total += recv
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "msgs/s")
		})
	}
}
