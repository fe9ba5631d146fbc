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
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
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

// FreePort returns a port of 127.0.0.1 that nothing listens on now
// (FreePortOn).
func FreePort(tb testing.TB) int {
	tb.Helper()
	return FreePortOn(tb, "127.0.0.1")
}

// FreePortOn returns a port of host that nothing listens on now, for a
// server the test starts later (PickPort).
func FreePortOn(tb testing.TB, host string) int {
	tb.Helper()
	port, err := PickPort(host)
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// PickPort returns a port of host that nothing listens on now, for a
// server started later. It is picked at random below the kernel's
// ephemeral range (ip_local_port_range), where no connection takes its
// local port: a port from that range (what a listen on port 0 gives)
// may meanwhile become the local port of any outgoing connection on the
// machine, and the server then fails to bind it (TestClusterFaults' NATS
// route port, "address already in use", once under load). Without room
// below the range it is the kernel's choice.
func PickPort(host string) (int, error) {
	if lo, hi := pickRange(); hi > lo {
		picked.Lock()
		defer picked.Unlock()
		for range 200 {
			port := lo + rand.IntN(hi-lo)
			if picked.ports[port] {
				continue // handed out before, perhaps not bound yet
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err == nil {
				ln.Close()
				picked.ports[port] = true
				return port, nil
			}
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("picking a port of %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// picked holds the ports PickPort handed out in this process: none is
// handed out twice (two picked before either server binds).
var picked = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// pickRange returns the ports PickPort picks from: up to 16,384 below the
// start of the ephemeral range (Linux's default 32768), none below 10000.
func pickRange() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				hi = n
			}
		}
	}
	return max(10000, hi-16384), hi
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
