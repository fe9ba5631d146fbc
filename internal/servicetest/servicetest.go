// Package servicetest gives integration tests the real services of the
// machine (RabbitMQ with STOMP, NATS, Mosquitto, PostgreSQL) and helpers to
// run private broker processes and to cut connections.
//
// A test that needs a service calls Require: when the service does not
// answer the test is skipped, unless TRACEBRIDGE_REQUIRE_SERVICES is set
// (CI sets it), in which case it fails — a skipped integration test must
// never pass CI silently.
package servicetest

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Addresses of the machine's services.
const (
	RabbitSTOMP = "127.0.0.1:61613"
	NATS        = "127.0.0.1:4222"
	Mosquitto   = "127.0.0.1:1883"
)

// Require makes sure something listens on addr.
func Require(tb testing.TB, addr, what string) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		return
	}
	if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") != "" {
		tb.Fatalf("%s is not reachable on %s (%v); TRACEBRIDGE_REQUIRE_SERVICES is set", what, addr, err)
	}
	tb.Skipf("%s is not reachable on %s: %v", what, addr, err)
}

// RequireBinary makes sure a program is installed.
func RequireBinary(tb testing.TB, path, what string) {
	tb.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") != "" {
		tb.Fatalf("%s (%s) is not installed; TRACEBRIDGE_REQUIRE_SERVICES is set", what, path)
	}
	tb.Skipf("%s (%s) is not installed", what, path)
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Proxy forwards loopback connections to a target and can cut them all,
// simulating a network failure between a client and its broker.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	paused bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to target; it stops with the test.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection; with down set, new ones are refused until
// Cut is called with down false.
func (p *Proxy) Cut() { p.cut() }

// Down cuts every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	p.cut()
}

// Up accepts connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

func (p *Proxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		paused := p.paused
		p.mu.Unlock()
		if paused {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(up, c); up.Close(); c.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, up); up.Close(); c.Close() }()
	}
}

// DeleteQueueAfter removes a RabbitMQ queue that a STOMP destination
// /queue/NAME created, when the test ends (best effort, with rabbitmqctl),
// so test runs do not pile up queues on the machine's broker.
func DeleteQueueAfter(tb testing.TB, destination string) {
	name := strings.TrimPrefix(destination, "/queue/")
	tb.Cleanup(func() {
		if path, err := exec.LookPath("rabbitmqctl"); err == nil {
			exec.Command(path, "delete_queue", name).Run()
		}
	})
}
