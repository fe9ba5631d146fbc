package mqtt

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

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
			persistentSession(t, servicetest.Mosquitto, id, topic) // subscribed before the first publish
			sink := &servicetest.RefusingSink{}
			r, err := New(Config{Name: "mqtt", URL: "mqtt://" + servicetest.Mosquitto, Topic: topic, ClientID: id,
				BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
			if err != nil {
				t.Fatal(err)
			}
			sink.Fail.Store(true)
			stop := servicetest.RunBridge(t, r, sink)
			publish(t, servicetest.Mosquitto, topic, 0, refused)
			deadline := time.Now().Add(10 * time.Second)
			for sink.Refused.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("nothing was refused")
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			sink.Fail.Store(false) // the sink recovers
			publish(t, servicetest.Mosquitto, topic, 100, 40)
			deadline = time.Now().Add(15 * time.Second)
			for len(sink.Missing(0, refused))+len(sink.Missing(100, 140)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			stop()
			if m := sink.Missing(0, refused); len(m) > 0 {
				t.Errorf("refused messages never delivered again: %v", m)
			}
			if m := sink.Missing(100, 140); len(m) > 0 {
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
