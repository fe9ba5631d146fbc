package natsd

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/tlstest"
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
	nc, err := natsgo.Connect("nats://"+a.Addr(), userInfo(a))
	if err != nil {
		t.Fatalf("a user still holds it: %v", err)
	}
	nc.Close()
	relB()
	if _, err := natsgo.Connect("nats://"+a.Addr(), userInfo(a)); err == nil {
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
	nc, err := natsgo.Connect("nats://"+s.Addr(), userInfo(s))
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

func userInfo(s *Server) natsgo.Option {
	c := s.Credentials()
	return natsgo.UserInfo(c.User, c.Password)
}

// TestAuthentication: every client of the embedded server authenticates
// with the credential the server generated under the data directory
// (mode 0600, reused when it starts again); a client without it, or with
// another, is refused, in-process as over TCP.
func TestAuthentication(t *testing.T) {
	dataDir := t.TempDir()
	s, err := Start(Config{StoreDir: filepath.Join(dataDir, "broker")})
	if err != nil {
		t.Fatal(err)
	}
	file := CredentialsFile(dataDir)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", file, fi.Mode().Perm())
	}
	c, err := ReadCredentials(file)
	if err != nil || c != s.Credentials() || c.User == "" || len(c.Password) < 32 {
		t.Fatalf("credentials file %+v %v, server's %+v", c, err, s.Credentials())
	}
	for name, opts := range map[string][]natsgo.Option{
		"none":           nil,
		"wrong password": {natsgo.UserInfo(c.User, c.Password+"x")},
		"in-process":     {natsgo.InProcessServer(s.InProcess())},
	} {
		if nc, err := natsgo.Connect("nats://"+s.Addr(), opts...); err == nil {
			nc.Close()
			t.Errorf("%s: connected without the credential", name)
		}
	}
	for name, opts := range map[string][]natsgo.Option{
		"tcp":        {userInfo(s)},
		"in-process": {userInfo(s), natsgo.InProcessServer(s.InProcess())},
	} {
		nc, err := natsgo.Connect("nats://"+s.Addr(), opts...)
		if err != nil {
			t.Errorf("%s with the credential: %v", name, err)
			continue
		}
		nc.Close()
	}
	s.Shutdown()
	// Started again, the server keeps its credential.
	s2, err := Start(Config{StoreDir: filepath.Join(dataDir, "broker")})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown()
	if s2.Credentials() != c {
		t.Fatalf("credential changed on restart: %+v, was %+v", s2.Credentials(), c)
	}
}

// TestPlainTextWarning: a server that listens off loopback in plain text
// (which validation allows only with insecure: true) says so once per
// listener at start; on loopback it says nothing.
func TestPlainTextWarning(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "0.0.0.0"} {
		var logs logtest.Buffer
		s, err := Start(Config{Host: host, MQTT: true, StoreDir: t.TempDir(), Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		s.Shutdown()
		nats := strings.Count(logs.String(), "embedded NATS server listens on")
		mqtt := strings.Count(logs.String(), "embedded NATS server (MQTT) listens on")
		if want := map[string]int{"127.0.0.1": 0, "0.0.0.0": 1}[host]; nats != want || mqtt != want || strings.Count(logs.String(), "in plain text (insecure: true)") != 2*want {
			t.Errorf("%s: %d NATS and %d MQTT warnings, want %d each:\n%s", host, nats, mqtt, want, logs.String())
		}
	}
}

// TestTLS: with a certificate, network clients speak TLS and present
// the credential; in-process clients need no TLS.
func TestTLS(t *testing.T) {
	cert := tlstest.New(t)
	s, err := Start(Config{StoreDir: t.TempDir(), TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if !s.TLS() {
		t.Error("TLS() false")
	}
	if nc, err := natsgo.Connect("nats://"+s.Addr(), userInfo(s), natsgo.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Error("a plain-text client connected")
	}
	nc, err := natsgo.Connect("tls://"+s.Addr(), userInfo(s), natsgo.Secure(&tls.Config{RootCAs: cert.Pool, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatalf("a TLS client with the credential: %v", err)
	}
	nc.Close()
	nc, err = natsgo.Connect("nats://"+s.Addr(), userInfo(s), natsgo.InProcessServer(s.InProcess()))
	if err != nil {
		t.Fatalf("in-process: %v", err)
	}
	nc.Close()
}

// TestStartQuiet: a start with MQTT logs no warning (the server warned of
// the bridge's own credential in plain text at every start), and the
// MQTT port the server picked itself is the one it listens on.
func TestStartQuiet(t *testing.T) {
	var logs logtest.Buffer
	srv, err := Start(Config{Host: "127.0.0.1", MQTT: true, StoreDir: filepath.Join(t.TempDir(), "broker"), Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	a := srv.MQTTAddr()
	if !strings.HasPrefix(a, "127.0.0.1:") || strings.HasSuffix(a, ":0") {
		t.Fatalf("MQTT address %q", a)
	}
	c, err := net.DialTimeout("tcp", a, 10*time.Second)
	if err != nil {
		t.Fatalf("MQTT port: %v", err)
	}
	c.Close()
	for _, l := range logs.Lines(t) {
		if l["level"] != "INFO" && l["level"] != "DEBUG" {
			t.Errorf("the start logged %v", l)
		}
	}
}
