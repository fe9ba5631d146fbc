package stomp

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	gostomp "github.com/go-stomp/stomp/v3"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

var cat = record.Builtin()

// perlMapping is the Perl probes' mapping: 1 entry, 2 exit, 3 trace.
func perlMapping(t *testing.T) *kdb.Mapping {
	m, err := kdb.ParseMapping("perl", strings.NewReader("1=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n2=kieker.common.record.flow.trace.operation.AfterOperationEvent\n3=kieker.common.record.flow.trace.Trace\n"), cat)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func perlMessages(t *testing.T) [][]byte {
	f, err := os.Open(testcorpus.Path(t, "kieker-streams", "perl-kdb-messages.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var msgs [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		msgs = append(msgs, append([]byte(nil), sc.Bytes()...))
	}
	return msgs
}

func queue(t *testing.T) string {
	q := fmt.Sprintf("/queue/tracebridge-test-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), rand.Int64())
	servicetest.DeleteQueueAfter(t, q)
	return q
}

func publisher(t *testing.T) *gostomp.Conn {
	c, err := gostomp.Dial("tcp", servicetest.RabbitSTOMP, gostomp.ConnOpt.Login("guest", "guest"), gostomp.ConnOpt.Host("/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect() })
	return c
}

// drain reads what is left in a queue for a moment (and acknowledges it).
func drain(t *testing.T, dest string, wait time.Duration) [][]byte {
	c := publisher(t)
	sub, err := c.Subscribe(dest, gostomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	timeout := time.After(wait)
	for {
		select {
		case m := <-sub.C:
			if m == nil || m.Err != nil {
				return got
			}
			got = append(got, m.Body)
		case <-timeout:
			return got
		}
	}
}

func newReceiver(t *testing.T, cfg Config) *Receiver {
	if cfg.URL == "" {
		cfg.URL = "stomp://guest:guest@" + servicetest.RabbitSTOMP
	}
	if cfg.Batch.Mapping == nil {
		cfg.Batch.Mapping = perlMapping(t)
	}
	r, err := New(cfg, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPerlMessagesThroughRabbitMQ publishes the Perl probes' 251 messages
// to RabbitMQ's STOMP queue and receives them as records; every message is
// acknowledged afterwards.
func TestPerlMessagesThroughRabbitMQ(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := queue(t)
	pub := publisher(t)
	for _, m := range perlMessages(t) {
		if err := pub.Send(dest, "text/plain", m); err != nil {
			t.Fatal(err)
		}
	}
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, newReceiver(t, Config{Name: "stomp", Destination: dest}), sink)
	sink.WaitFor(t, 251, 20*time.Second)
	time.Sleep(300 * time.Millisecond) // a flush later everything is acknowledged
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, r := range sink.Records() {
		counts[r.Type.ShortName()]++
	}
	if counts["TraceMetadata"] != 1 || counts["BeforeOperationEvent"] != 125 || counts["AfterOperationEvent"] != 125 {
		t.Fatalf("counts %v", counts)
	}
	tr := sink.Records()[0]
	if tr.Values[0].Int() != 11727 || tr.Values[3].Str() != "vm" {
		t.Fatalf("trace record %v", tr.Values)
	}
	if left := drain(t, dest, 500*time.Millisecond); len(left) != 0 {
		t.Fatalf("%d messages left unacknowledged in the queue", len(left))
	}
}

// TestBinaryAndBadMessages: byte messages with several KDB binary records,
// and a malformed message between good ones that is dead-lettered and
// acknowledged while the others go on.
func TestBinaryAndBadMessages(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest, dlq := queue(t), queue(t)
	pub := publisher(t)
	m := perlMapping(t)
	typ := cat.Lookup(record.BeforeOperationEvent)
	for msg := 0; msg < 20; msg++ {
		var body []byte
		var b record.Batch
		for i := 0; i < 50; i++ {
			r := b.Add(typ, -1)
			r.Values[1] = record.IntValue(int64(msg))
			r.Values[2] = record.IntValue(int64(i))
			r.Values[3] = record.StringValue("op()")
			body, _ = kdb.AppendBinary(body, 1, r)
		}
		if err := pub.Send(dest, "application/octet-stream", body); err != nil {
			t.Fatal(err)
		}
		if msg == 10 {
			pub.Send(dest, "text/plain", []byte("1;not-a-number;1;0;op;cls"))
			pub.Send(dest, "application/octet-stream", []byte{0, 0, 0, 77, 1, 2})
		}
	}
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, newReceiver(t, Config{Name: "stomp", Destination: dest, DeadLetter: dlq, Batch: broker.Config{Mapping: m}}), sink)
	sink.WaitFor(t, 1000, 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	stop()
	if n := sink.Len(); n != 1000 {
		t.Fatalf("%d records, want 1000", n)
	}
	dead := drain(t, dlq, time.Second)
	if len(dead) != 2 || !bytes.HasPrefix(dead[0], []byte("1;not-a-number")) {
		t.Fatalf("dead letters %q", dead)
	}
	if left := drain(t, dest, 300*time.Millisecond); len(left) != 0 {
		t.Fatalf("%d messages left", len(left))
	}
}

// TestNothingAcknowledgedUntilDurable: when the sink cannot flush, nothing
// is acknowledged; a later receiver gets every message again.
func TestNothingAcknowledgedUntilDurable(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := queue(t)
	pub := publisher(t)
	msgs := perlMessages(t)[:100]
	for _, m := range msgs {
		pub.Send(dest, "text/plain", m)
	}
	failing := &servicetest.Collector{FailFlush: true}
	stop := servicetest.RunBridge(t, newReceiver(t, Config{Name: "first", Destination: dest}), failing)
	failing.WaitFor(t, 100, 20*time.Second)
	stop()
	good := &servicetest.Collector{}
	stop = servicetest.RunBridge(t, newReceiver(t, Config{Name: "second", Destination: dest}), good)
	good.WaitFor(t, 100, 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	stop()
	if left := drain(t, dest, 300*time.Millisecond); len(left) != 0 {
		t.Fatalf("%d messages left", len(left))
	}
}

// TestBrokerConnectionCut: the connection to RabbitMQ is cut during a
// stream; the receiver reconnects and every message arrives (redelivered
// ones may come twice).
func TestBrokerConnectionCut(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := queue(t)
	proxy := servicetest.NewProxy(t, servicetest.RabbitSTOMP)
	pub := publisher(t)
	sink := &servicetest.Collector{}
	r := newReceiver(t, Config{Name: "cut", URL: "stomp://guest:guest@" + proxy.Addr(), Destination: dest, BackoffMin: 20 * time.Millisecond})
	stop := servicetest.RunBridge(t, r, sink)
	msgs := perlMessages(t)
	for i, m := range msgs {
		pub.Send(dest, "text/plain", m)
		if i == 100 {
			time.Sleep(200 * time.Millisecond)
			proxy.Down()
			time.Sleep(300 * time.Millisecond)
			proxy.Up()
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for distinct(sink) < len(msgs) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	if n := distinct(sink); n != len(msgs) {
		t.Fatalf("%d distinct records after a connection cut, want %d", n, len(msgs))
	}
	if left := drain(t, dest, 300*time.Millisecond); len(left) != 0 {
		t.Fatalf("%d messages left", len(left))
	}
}

// distinct counts distinct records (redelivery may duplicate).
func distinct(c *servicetest.Collector) int {
	seen := map[string]bool{}
	for _, r := range c.Records() {
		seen[fmt.Sprint(r.Type.Name, r.Values[0].Int(), r.Values[2].Int(), r.Values[3].Str())] = true
	}
	return len(seen)
}

func TestURLAndCredentialsNeverLogged(t *testing.T) {
	r, err := New(Config{Name: "x", URL: "stomp+ssl://bob:s3cret@broker.example:61614"}, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Target(), "s3cret") || r.Target() != "stomp+ssl://broker.example:61614/queue/kieker.tools.bridge" {
		t.Fatalf("target %q", r.Target())
	}
	if _, err := New(Config{URL: "http://bob:s3cret@x"}, broker.Settings{}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v", err)
	}
	if _, err := New(Config{URL: "stomp://bob:s3cret@x:bad port"}, broker.Settings{}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v", err)
	}
}

// TestRefusedLoginSaysWhy: a wrong password is retried like an outage, but
// the error says what the broker said, without the credentials.
func TestRefusedLoginSaysWhy(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	const password = "not-the-password-7f3a"
	r := newReceiver(t, Config{URL: "stomp://guest:" + password + "@" + servicetest.RabbitSTOMP})
	_, _, err := r.dial(t.Context())
	if err == nil {
		t.Fatal("a wrong password was accepted")
	}
	t.Logf("refused: %v", err)
	msg := err.Error()
	if !strings.Contains(msg, "Access refused") {
		t.Errorf("error %q: want RabbitMQ's reason (Access refused)", msg)
	}
	if strings.Contains(msg, password) || strings.Contains(msg, "guest") {
		t.Errorf("error %q shows the credentials", msg)
	}
}

// TestRefusedDeadLetterDestination: a dead-letter destination RabbitMQ
// refuses (a file path) is reported once and turns dead-lettering off; the
// consuming connection is not lost, every good message arrives, the
// malformed ones are counted and acknowledged, nothing stays in the queue.
func TestRefusedDeadLetterDestination(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := queue(t)
	pub := publisher(t)
	for i := 0; i < 200; i++ {
		if err := pub.Send(dest, "text/plain", fmt.Appendf(nil, "1;%d;42;%d;op();a.B", 1000+i, i)); err != nil {
			t.Fatal(err)
		}
		if i%50 == 10 {
			pub.Send(dest, "text/plain", []byte("1;not-a-number;42;0;op();a.B"))
		}
	}
	var logs logtest.Buffer
	r, err := New(Config{Name: "dl", URL: "stomp://guest:guest@" + servicetest.RabbitSTOMP, Destination: dest,
		DeadLetter: "./dead-letters", Batch: broker.Config{Mapping: perlMapping(t)}},
		broker.Settings{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sink := &servicetest.Collector{}
	stop := servicetest.RunBridge(t, r, sink)
	sink.WaitFor(t, 200, 20*time.Second)
	time.Sleep(300 * time.Millisecond) // acknowledged after a flush
	stop()
	if n := distinct(sink); n != 200 {
		t.Fatalf("%d of 200 good records", n)
	}
	out := logs.String()
	if n := strings.Count(out, `msg="dead-letter destination refused`); n != 1 {
		t.Errorf("refusal logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "malformed message acknowledged"); n != 4 {
		t.Errorf("%d malformed messages logged, want 4:\n%s", n, out)
	}
	if strings.Contains(out, "reconnect") || strings.Contains(out, "connection lost") {
		t.Errorf("the consuming connection was lost:\n%s", out)
	}
	if left := drain(t, dest, 500*time.Millisecond); len(left) != 0 {
		t.Fatalf("%d messages left in the queue", len(left))
	}
}

// TestURLWithoutScheme: HOST:PORT alone (a YAML url without stomp://) is
// refused with what a URL looks like, not url.Parse's reason.
func TestURLWithoutScheme(t *testing.T) {
	for _, u := range []string{"127.0.0.1:61613", "localhost:61613", "guest:s3cret@127.0.0.1:61613"} {
		_, err := New(Config{Name: "x", URL: u}, broker.Settings{})
		if err == nil || !strings.Contains(err.Error(), "want stomp://HOST:PORT") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("url %q: %v", u, err)
		}
	}
}
