package natsd

import (
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAcquire: components of one bridge share its server; an address or
// MQTT listener it does not have is an error; the last release stops it.
func TestAcquire(t *testing.T) {
	sh := &pipeline.Shared{}
	dir := t.TempDir()
	a, relA, err := Acquire(sh, Config{Host: "127.0.0.1", MQTT: true, StoreDir: dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, relB, err := Acquire(sh, Config{Host: "127.0.0.1", Port: 1, StoreDir: dir}, true) // any address
	if err != nil || b != a {
		t.Fatalf("shared: %v %v", b == a, err)
	}
	if _, _, err := Acquire(sh, Config{Host: "127.0.0.1", Port: 1, StoreDir: dir}, false); err == nil || !strings.Contains(err.Error(), "one embedded server") {
		t.Fatalf("another port: %v", err)
	}
	c, relC, err := Acquire(sh, Config{MQTT: true, StoreDir: dir}, false)
	if err != nil || c != a {
		t.Fatalf("no address, MQTT: %v", err)
	}
	relA()
	relA() // once only
	relC()
	nc, err := natsgo.Connect("nats://" + a.Addr())
	if err != nil {
		t.Fatalf("a user still holds it: %v", err)
	}
	nc.Close()
	relB()
	if _, err := natsgo.Connect("nats://" + a.Addr()); err == nil {
		t.Fatal("running after the last release")
	}
	// A new first user starts a new server, without MQTT.
	d, relD, err := Acquire(sh, Config{StoreDir: dir}, false)
	if err != nil || d == a || d.MQTTAddr() != "" {
		t.Fatalf("after the last release: %v", err)
	}
	if _, _, err := Acquire(sh, Config{MQTT: true, StoreDir: dir}, true); err == nil || !strings.Contains(err.Error(), "without MQTT") {
		t.Fatalf("MQTT it lacks: %v", err)
	}
	relD()
}

func TestSubscriberIPs(t *testing.T) {
	s, err := Start(Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	nc, err := natsgo.Connect("nats://" + s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SubscribeSync("_INBOX.abc.*")
	nc.Flush()
	ips, err := s.SubscriberIPs("_INBOX.abc.def")
	if err != nil || len(ips) != 1 || ips[0] != "127.0.0.1" {
		t.Fatalf("%v %v", ips, err)
	}
	if ips, _ := s.SubscriberIPs("other"); len(ips) != 0 {
		t.Fatalf("%v", ips)
	}
}
