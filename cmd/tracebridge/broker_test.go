package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	gostomp "github.com/go-stomp/stomp/v3"
	natsgo "github.com/nats-io/nats.go"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/stream"
)

const perlMap = "1=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n2=kieker.common.record.flow.trace.operation.AfterOperationEvent\n3=kieker.common.record.flow.trace.Trace\n"

// TestPerlProbeFramesThroughRabbitMQ sends the STOMP frames the EPrints Perl
// probes sent (Net::Stomp, STOMP 1.0, no content-length) to RabbitMQ and
// runs `serve -t jms-client` on the queue: the Kieker log is correct and the
// password appears nowhere in the output.
func TestPerlProbeFramesThroughRabbitMQ(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := fmt.Sprintf("/queue/tracebridge-e2e-%d", rand.Int64())
	servicetest.DeleteQueueAfter(t, dest)
	frames := testcorpus.Read(t, "kieker-streams", "perl-stomp.bin")
	// The probes hard-code login hello/there; RabbitMQ here has guest/guest.
	frames = bytes.ReplaceAll(frames, []byte("login:hello\n"), []byte("login:guest\n"))
	frames = bytes.ReplaceAll(frames, []byte("passcode:there\n"), []byte("passcode:guest\n"))
	frames = bytes.ReplaceAll(frames, []byte("/queue/kieker.tools.bridge"), []byte(dest))
	c, err := net.Dial("tcp", servicetest.RabbitSTOMP)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(frames)
	time.Sleep(500 * time.Millisecond)
	c.Close()

	dir := t.TempDir()
	writeFile(t, dir+"/perl.map", perlMap)
	p := bridgetest.Start(t, dir, "-t", "jms-client", "-l", "stomp://127.0.0.1:61613", "-u", "guest", "-w", "guest",
		"--destination", dest, "-m", "perl.map", "--data-dir", "logs", "-v", "251")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.Stdout(), "received 251 records") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a flush: acknowledged
	p.Stop()
	recs := bridgetest.ReadLogSkipBad(t, p.LogDir)
	counts := countByType(recs)
	if counts["TraceMetadata"] != 1 || counts["BeforeOperationEvent"] != 125 || counts["AfterOperationEvent"] != 125 {
		t.Fatalf("counts %v", counts)
	}
	// The trace is well formed: orderIndex 0..249 across entries and exits.
	for i, r := range recs[2:] {
		if r.Values[2].Int() != int64(i) {
			t.Fatalf("record %d has orderIndex %d", i, r.Values[2].Int())
		}
	}
	if strings.Contains(p.Stdout()+p.Stderr(), "guest@") {
		t.Error("credentials in the output")
	}
}

// TestBrokerKillAndRestart kills the bridge (-9) in the middle of a stream
// from RabbitMQ and starts it again: every message ends up in one of the two
// logs; nothing acknowledged is lost, nothing is left in the queue.
func TestBrokerKillAndRestart(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := fmt.Sprintf("/queue/tracebridge-kill-%d", rand.Int64())
	servicetest.DeleteQueueAfter(t, dest)
	pub, err := gostomp.Dial("tcp", servicetest.RabbitSTOMP, gostomp.ConnOpt.Login("guest", "guest"), gostomp.ConnOpt.Host("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect()
	const n = 8000
	dir := t.TempDir()
	cfg := bridgetest.WriteConfig(t, dir, fmt.Sprintf(`
flush_interval: 100ms
receivers: [{type: stomp-client, url: "stomp://guest:guest@127.0.0.1:61613", destination: %q}]
sinks: [{type: kieker-log, path: logs}]
`, dest))
	go func() {
		for i := 0; i < n; i++ {
			pub.Send(dest, "text/plain", fmt.Appendf(nil, "1;%d;42;%d;op();a.B", 1000+i, i))
		}
	}()
	p1 := bridgetest.Start(t, dir, "-c", cfg)
	time.Sleep(700 * time.Millisecond)
	p1.Kill()
	first := len(bridgetest.ReadLogSkipBad(t, p1.LogDir))
	p2 := bridgetest.Start(t, dir, "-c", cfg)
	seen := map[int64]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		clear(seen)
		for _, d := range []string{p1.LogDir, p2.LogDir} {
			for _, r := range bridgetest.ReadLogSkipBad(t, d) {
				if r.Type.ShortName() == "BeforeOperationEvent" {
					seen[r.Values[2].Int()] = true
				}
			}
		}
	}
	p2.Stop()
	if len(seen) != n {
		t.Fatalf("%d of %d messages in the two logs (first run wrote %d records before kill -9)", len(seen), n, first)
	}
	t.Logf("first run wrote %d records before kill -9", first)
}

// TestEmbeddedBrokerServe runs `serve -t jms-embedded` with MQTT and
// publishes over NATS and MQTT.
func TestEmbeddedBrokerServe(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-t", "jms-embedded", "-p", "0", "--mqtt-port", "0", "--data-dir", "data", "-v", "400")
	where := p.Receivers["broker-embedded"]
	m := regexpFind(p.Stdout(), `listening on nats://(\S+) and mqtt://(\S+)`)
	if m == nil {
		t.Fatalf("no broker addresses: %q\n%s", where, p.Stdout())
	}
	// Publishers present the credential under the data directory.
	user, pass, err := stream.ReadCredentials(stream.CredentialsFile(filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := natsgo.Connect("nats://" + m[1]); err == nil {
		nc.Close()
		t.Fatal("a publisher without the credential connected")
	}
	nc, err := natsgo.Connect("nats://"+m[1], natsgo.UserInfo(user, pass))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		nc.Publish("kieker.tools.bridge", fmt.Appendf(nil, "1;%d;5;%d;op();a.B", i, i))
	}
	nc.Flush()
	nc.Close()
	mc := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + m[2]).SetClientID("e2e").SetUsername(user).SetPassword(pass))
	if tok := mc.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	for i := 200; i < 400; i++ {
		mc.Publish("kieker/tools/bridge", 1, false, fmt.Appendf(nil, "1;%d;5;%d;op();a.B", i, i)).WaitTimeout(5 * time.Second)
	}
	mc.Disconnect(100)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.Stdout(), "received 400 records") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	p.Stop()
	if got := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))[5]; got != 400 {
		t.Fatalf("%d of 400 records through the embedded broker", got)
	}
	if _, err := os.Stat(dir + "/data/broker"); err != nil {
		t.Fatalf("JetStream storage not under the data directory: %v", err)
	}
}

// TestBadDeadLetterDestination: `--dead-letter ./dead-letters` is a path,
// not a destination, and RabbitMQ refuses it ("Unknown destination"). The
// refusal is reported once, with what a destination looks like, and turns
// dead-lettering off: the bridge keeps its connection, every good message
// reaches the log, the malformed ones are counted and acknowledged, and
// nothing stays in the queue.
func TestBadDeadLetterDestination(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := fmt.Sprintf("/queue/tracebridge-dlq-%d", rand.Int64())
	servicetest.DeleteQueueAfter(t, dest)
	pub, err := gostomp.Dial("tcp", servicetest.RabbitSTOMP, gostomp.ConnOpt.Login("guest", "guest"), gostomp.ConnOpt.Host("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect()
	const good, bad = 300, 3
	for i := 0; i < good; i++ {
		if err := pub.Send(dest, "text/plain", fmt.Appendf(nil, "1;%d;7;%d;op();a.B", 1000+i, i)); err != nil {
			t.Fatal(err)
		}
		if i%100 == 50 {
			pub.Send(dest, "text/plain", []byte("1;not-a-number;7;0;op();a.B"))
		}
	}
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-t", "stomp-client", "-l", "stomp://127.0.0.1:61613", "-u", "guest", "-w", "guest",
		"--destination", dest, "--dead-letter", "./dead-letters", "--data-dir", "logs", "--metrics", "127.0.0.1:0", "-v", fmt.Sprint(good))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.Stdout(), fmt.Sprintf("received %d records", good)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a flush: acknowledged
	metrics := scrape(t, p.Metrics)
	p.Stop()
	if got := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))[7]; got != good {
		t.Fatalf("%d of %d good records in the log; stderr:\n%s", got, good, p.Stderr())
	}
	if want := fmt.Sprintf(`tracebridge_decode_errors_total{receiver="stomp-client"} %d`, bad); !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "decode_errors"))
	}
	logs := p.Stderr()
	if n := strings.Count(logs, `msg="dead-letter destination refused`); n != 1 {
		t.Errorf("the refusal is reported %d times, want once:\n%s", n, logs)
	}
	for _, want := range []string{"./dead-letters", "/queue/", "dead-lettering is off"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "reconnect") {
		t.Errorf("the bridge reconnected:\n%s", logs)
	}
	if left := drainQueue(t, dest, 500*time.Millisecond); left != 0 {
		t.Fatalf("%d messages left in the queue", left)
	}
}

// scrape returns the text of the metrics endpoint at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	if addr == "" {
		t.Fatal("no metrics address")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
	body, _ := io.ReadAll(c)
	return string(body)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// drainQueue consumes what is left in a queue for a moment and returns how
// many messages that was.
func drainQueue(t *testing.T, dest string, wait time.Duration) int {
	t.Helper()
	c, err := gostomp.Dial("tcp", servicetest.RabbitSTOMP, gostomp.ConnOpt.Login("guest", "guest"), gostomp.ConnOpt.Host("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect()
	sub, err := c.Subscribe(dest, gostomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	timeout := time.After(wait)
	for {
		select {
		case m := <-sub.C:
			if m == nil || m.Err != nil {
				return n
			}
			n++
		case <-timeout:
			return n
		}
	}
}
