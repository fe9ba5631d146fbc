package nats

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

var cat = record.Builtin()

func mapping(t *testing.T) *kdb.Mapping {
	m, err := kdb.DefaultMapping(cat)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// event returns one KDB text message: a Before event of trace tr.
func event(tr, i int) []byte {
	return fmt.Appendf(nil, "1;%d;%d;%d;op%d();a.B", 1000+i, tr, i, i%5)
}

func names(t *testing.T) (subject, stream string) {
	n := rand.Int64N(1 << 40)
	return fmt.Sprintf("tbtest.%d", n), fmt.Sprintf("TBTEST%d", n)
}

// jetStream connects to the server at url until the test ends.
func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := natsgo.Connect(url)
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

func publishJS(t *testing.T, url, subject string, from, n int) {
	js := jetStream(t, url)
	ctx := context.Background()
	for i := from; i < from+n; i++ {
		if _, err := js.Publish(ctx, subject, event(7, i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

// waitStream waits until the receiver has made stream (or the server
// recovered it): what is published then is stored.
func waitStream(t *testing.T, url, stream string) {
	t.Helper()
	js := jetStream(t, url)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := js.Stream(context.Background(), stream)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: %v", stream, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStored waits until stream holds n messages.
func waitStored(t *testing.T, url, stream string, n uint64) {
	t.Helper()
	js := jetStream(t, url)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		if info.State.Msgs >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s holds %d messages, want %d", stream, info.State.Msgs, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestJetStreamOnTheMachinesNATS consumes from the machine's NATS server;
// records published before the receiver starts and while it runs arrive.
func TestJetStreamOnTheMachinesNATS(t *testing.T) {
	servicetest.Require(t, servicetest.NATS, "NATS")
	subject, stream := names(t)
	url := "nats://" + servicetest.NATS
	r, err := New(Config{Name: "nats", URL: url, Subject: subject, Stream: stream, Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, r, sink)
	defer deleteStream(t, url, stream)
	waitStream(t, url, stream)
	publishJS(t, url, subject, 0, 500)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 500, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	stop()
	// Stopped: publish more; a new receiver (same durable) gets only those.
	publishJS(t, url, subject, 500, 300)
	r2, _ := New(Config{Name: "nats", URL: url, Subject: subject, Stream: stream, Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
	sink2 := &servicetest.Collector{}
	stop = servicetest.RunBridge(t, r2, sink2)
	sink2.WaitDistinct(t, servicetest.ByOrderIndex, 300, 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	stop()
	if n := sink2.Len(); n != 300 || sink2.Records()[0].Values[2].Int() != 500 {
		t.Fatalf("second run got %d records starting at %d: acknowledged messages came again", n, sink2.Records()[0].Values[2].Int())
	}
}

func deleteStream(t *testing.T, url, stream string) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	js.DeleteStream(context.Background(), stream)
}

// TestNATSServerRestart runs a private nats-server with JetStream, restarts
// it in the middle of a stream, and checks that nothing is lost.
func TestNATSServerRestart(t *testing.T) {
	servicetest.RequireBinary(t, "/usr/sbin/nats-server", "nats-server")
	port := servicetest.FreePort(t)
	dir := t.TempDir()
	start := func() *exec.Cmd {
		cmd := exec.Command("/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			if nc, err := natsgo.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port)); err == nil {
				nc.Close()
				return cmd
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("nats-server did not start")
		return nil
	}
	srv := start()
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	r, err := New(Config{Name: "restart", URL: url, Batch: broker.Config{Mapping: mapping(t)}, BackoffMin: 20 * time.Millisecond}, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, r, sink)
	waitStream(t, url, DefaultStream)
	publishJS(t, url, DefaultSubject, 0, 1000)
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	srv = start()
	waitStream(t, url, DefaultStream) // recovered from its files
	publishJS(t, url, DefaultSubject, 1000, 1000)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 2000, 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	stop()
}

// TestEmbeddedBroker: NATS and MQTT publishers into the embedded broker;
// what is published while no consumer runs is delivered when one starts,
// also across a restart of the broker (file storage).
func TestEmbeddedBroker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "broker")
	srv, err := StartServer(ServerConfig{Port: 0, MQTT: true, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") || srv.MQTTAddr() == "" {
		t.Fatalf("addresses %q %q", srv.Addr(), srv.MQTTAddr())
	}
	newRecv := func(s *Server) *Receiver {
		c := s.Credentials()
		r, err := New(Config{Name: "embedded", InProcess: s.InProcess(), User: c.User, Password: c.Password, Batch: broker.Config{Mapping: mapping(t)}}, broker.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, newRecv(srv), sink)
	waitStream(t, authURL(srv), DefaultStream)
	stop()

	// Publishers without the credential are refused.
	if nc, err := natsgo.Connect("nats://" + srv.Addr()); err == nil {
		nc.Close()
		t.Fatal("a NATS publisher without the credential connected")
	}
	anon := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + srv.MQTTAddr()).SetClientID("anon").SetConnectRetry(false).SetAutoReconnect(false))
	if tok := anon.Connect(); tok.WaitTimeout(10*time.Second) && tok.Error() == nil {
		anon.Disconnect(100)
		t.Fatal("an MQTT publisher without the credential connected")
	}
	// Consumer stopped: publish over NATS and MQTT.
	publishJS(t, authURL(srv), DefaultSubject, 0, 200)
	creds := srv.Credentials()
	mc := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + srv.MQTTAddr()).SetClientID("pub").SetUsername(creds.User).SetPassword(creds.Password))
	if tok := mc.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect: %v", tok.Error())
	}
	for i := 200; i < 300; i++ {
		tok := mc.Publish("kieker/tools/bridge", 1, false, event(7, i))
		if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("mqtt publish: %v", tok.Error())
		}
	}
	mc.Disconnect(100)
	// The server acknowledges an MQTT QoS 1 publish once routed; the
	// stream stores it a moment later. Wait for that before the restart,
	// which is about what file storage keeps.
	waitStored(t, authURL(srv), DefaultStream, 300)
	// Restart the broker itself: file storage keeps the messages.
	srv.Shutdown()
	srv, err = StartServer(ServerConfig{Port: 0, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sink = &servicetest.Collector{}
	stop = servicetest.RunBridge(t, newRecv(srv), sink)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 300, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	stop()
}

func TestEmbeddedPortInUse(t *testing.T) {
	srv, err := StartServer(ServerConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	port := srv.Addr()
	p := port[strings.LastIndexByte(port, ':')+1:]
	var n int
	fmt.Sscan(p, &n)
	if _, err := StartServer(ServerConfig{Port: n, StoreDir: t.TempDir()}); err == nil {
		t.Fatal("second broker on the same port started")
	}
}

// authURL is the embedded server's URL with its credential.
func authURL(s *Server) string {
	c := s.Credentials()
	return "nats://" + url.UserPassword(c.User, c.Password).String() + "@" + s.Addr()
}

// TestEmbeddedListenPolicy: broker-embedded follows the listener policy:
// off loopback without TLS the configuration is refused naming listen and
// the fix; insecure: true allows it; loopback needs neither.
func TestEmbeddedListenPolicy(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:4222", ":4222", "[::]:4222", "192.0.2.1:4222"} {
		c := EmbeddedConfig{Listen: addr}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "listen "+addr) || !strings.Contains(err.Error(), "insecure: true") || !strings.Contains(err.Error(), "tls: {cert, key}") {
			t.Errorf("%s without tls: %v; want a refusal naming listen and the fix", addr, err)
		}
		c.Insecure = true
		if err := c.Validate(); err != nil {
			t.Errorf("%s with insecure: true: %v", addr, err)
		}
	}
	if err := (&EmbeddedConfig{Listen: "127.0.0.1:4222"}).Validate(); err != nil {
		t.Error(err)
	}
}
