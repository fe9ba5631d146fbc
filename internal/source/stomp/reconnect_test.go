package stomp

import (
	"fmt"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

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
	sink := &servicetest.RefusingSink{}
	r := newReceiver(t, Config{Name: "refuse", URL: "stomp://guest:guest@" + proxy.Addr(), Destination: dest,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Batch: broker.Config{Mapping: perlMapping(t), MaxDelay: time.Second}})
	stop := servicetest.RunBridge(t, r, sink)
	time.Sleep(500 * time.Millisecond) // subscribed
	send(0, 10)                        // held for a batch (MaxDelay 1 s)
	time.Sleep(200 * time.Millisecond)
	proxy.Cut() // the connection is lost with 0..9 held
	time.Sleep(300 * time.Millisecond)
	sink.Fail.Store(true)
	send(10, 10) // on the new connection, with 0..9 redelivered
	deadline := time.Now().Add(10 * time.Second)
	for sink.Refused.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no batch was refused")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sink.Fail.Store(false)
	send(20, 10) // a later good batch
	deadline = time.Now().Add(15 * time.Second)
	for len(sink.Missing(0, 30)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the last acknowledgements
	stop()
	if m := sink.Missing(0, 30); len(m) > 0 {
		t.Errorf("records never accepted (acknowledged while refused): %v", m)
	}
	if left := drain(t, dest, 500*time.Millisecond); len(left) != 0 {
		t.Errorf("%d messages left in the queue", len(left))
	}
}
