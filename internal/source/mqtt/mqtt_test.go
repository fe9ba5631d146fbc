package mqtt

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

func mapping(t *testing.T) *kdb.Mapping {
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

// TestMosquittoRestart restarts a private mosquitto during a stream.
func TestMosquittoRestart(t *testing.T) {
	servicetest.RequireBinary(t, "/usr/sbin/mosquitto", "mosquitto")
	port := servicetest.FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "m.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\n", port, dir)), 0o644)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	start := func() *exec.Cmd {
		cmd := exec.Command("/usr/sbin/mosquitto", "-c", conf)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("probe"))
			if tok := c.Connect(); tok.WaitTimeout(time.Second) && tok.Error() == nil {
				c.Disconnect(10)
				return cmd
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("mosquitto did not start")
		return nil
	}
	m := start()
	t.Cleanup(func() { m.Process.Kill(); m.Wait() })
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, newReceiver(t, addr, "kieker/tools/bridge", "tb-restart"), sink)
	time.Sleep(300 * time.Millisecond)
	publish(t, addr, "kieker/tools/bridge", 0, 200)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 200, 30*time.Second)
	m.Process.Kill()
	m.Wait()
	m = start()
	time.Sleep(1500 * time.Millisecond) // the receiver reconnects (back-off ≤ 1 s)
	publish(t, addr, "kieker/tools/bridge", 200, 200)
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
	if strings.Contains(r.Target(), "secret") || r.Target() != "tcp://h:1883 kieker/tools/bridge" {
		t.Fatalf("target %q", r.Target())
	}
}
