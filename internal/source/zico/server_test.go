package zico_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/zico"
	"github.com/tracebridge/tracebridge/internal/tlstest"
)

// TestOKAfterCommit: the reply to DATA waits for Data to return.
func TestOKAfterCommit(t *testing.T) {
	h := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	_, addr, _ := server(t, h, zico.ServerConfig{})
	c := dial(t, addr)
	c.send(codec.Hello, helloPayload("h1", "pw"))
	c.expect(codec.OK)
	data, _ := examplePayload()
	c.send(codec.Data, data)
	<-h.entered
	c.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	if n, err := c.conn.Read(b[:]); n != 0 || err == nil {
		t.Fatalf("a reply before Data returned: %d %v", n, err)
	}
	close(h.block)
	c.expect(codec.OK)
	_, batches := h.snapshot()
	if len(batches) != 1 || batches[0].Info.Host != "h1" || batches[0].Info.ID == 0 ||
		batches[0].Info.Remote.String() != c.conn.LocalAddr().String() {
		t.Fatalf("batches %+v", batches)
	}
}

// TestAgentResends: the test agent, like zorka's, reconnects, says HELLO
// again and resends the whole batch (symbols included) after a failure.
func TestAgentResends(t *testing.T) {
	h := &recorder{dataErr: func(n int) error {
		if n == 1 {
			return errors.New("store busy")
		}
		return nil
	}}
	_, addr, _ := server(t, h, zico.ServerConfig{})
	a := zicotest.NewAgent(addr, "h1", "pw")
	a.Backoff = time.Millisecond
	defer a.Close()
	ctx := context.Background()
	for i := range 3 {
		r := exampleRecord()
		if err := a.Send(ctx, &r); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if a.Connects != 2 || a.Tries != 4 {
		t.Fatalf("%d connects, %d tries; want 2, 4", a.Connects, a.Tries)
	}
	_, batches := h.snapshot()
	var got []string
	for _, b := range batches {
		got = append(got, b.Traces...)
	}
	want := []string{exampleDump, exampleDump, exampleDump, exampleDump}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestAgentGivesUp after Retries tries.
func TestAgentGivesUp(t *testing.T) {
	h := &recorder{dataErr: func(int) error { return fmt.Errorf("gone: %w", zico.ErrEOD) }}
	_, addr, _ := server(t, h, zico.ServerConfig{})
	a := zicotest.NewAgent(addr, "h1", "pw")
	a.Backoff, a.Retries = time.Millisecond, 3
	r := exampleRecord()
	err := a.Send(context.Background(), &r)
	var re *zicotest.ReplyError
	if !errors.As(err, &re) || re.Reply != codec.EOD || a.Tries != 3 {
		t.Fatalf("%v after %d tries", err, a.Tries)
	}
}

// TestManyAgents: concurrent connections do not disturb each other, and
// a failing one does not affect the others.
func TestManyAgents(t *testing.T) {
	h := &recorder{}
	srv, addr, _ := server(t, h, zico.ServerConfig{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			a := zicotest.NewAgent(addr, fmt.Sprint("host", i), "")
			defer a.Close()
			rng := mrand.New(mrand.NewPCG(uint64(i), 1))
			for range 20 {
				r := zicotest.Generate(rng, 50, clock)
				if err := a.Send(context.Background(), &r); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// Meanwhile a broken client.
	c := dial(t, addr)
	c.raw([]byte("GET / HTTP/1.0\r\n\r\n"))
	c.expect(codec.BadReply)
	wg.Wait()
	_, batches := h.snapshot()
	if len(batches) != 160 {
		t.Fatalf("%d batches", len(batches))
	}
	if st := srv.Stats(); st.Traces != 160 || st.Records != 160*50 {
		waitFor(t, "stats", func() bool { st = srv.Stats(); return st.Traces == 160 })
		if st.Records != 160*50 {
			t.Fatalf("stats %+v", st)
		}
	}
}

func TestMaxConnections(t *testing.T) {
	srv, addr, logs := server(t, &recorder{}, zico.ServerConfig{MaxConnections: 2})
	a, b := dial(t, addr), dial(t, addr)
	a.open()
	b.open()
	c := dial(t, addr)
	c.closed()
	a.conn.Close()
	waitFor(t, "a slot", func() bool { return srv.Stats().Open == 1 })
	d := dial(t, addr)
	d.open()
	b.open()
	if st := srv.Stats(); st.Rejected != 1 || st.Connections != 4 {
		t.Fatalf("stats %+v", st)
	}
	found := false
	for _, l := range logs.lines(t) {
		found = found || l["msg"] == "zico connection refused: too many connections"
	}
	if !found {
		t.Fatal("refusal not logged")
	}
}

// TestShutdown: a session in a hook finishes its frame; a waiting one
// ends at once; both calls twice; Serve afterwards refuses.
func TestShutdown(t *testing.T) {
	h := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	srv, err := zico.NewServer(h, zico.ServerConfig{}, zico.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	busy, idle := dial(t, ln.Addr().String()), dial(t, ln.Addr().String())
	idle.open()
	busy.send(codec.Hello, helloPayload("h1", "pw"))
	busy.expect(codec.OK)
	data, _ := examplePayload()
	busy.send(codec.Data, data)
	<-h.entered

	down := make(chan error, 1)
	go func() { down <- srv.Shutdown(context.Background()) }()
	idle.closed() // at once
	select {
	case err := <-down:
		t.Fatalf("Shutdown returned %v while a hook runs", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(h.block)
	busy.expect(codec.OK) // the frame in progress is answered
	busy.closed()
	if err := <-down; err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, zico.ErrServerClosed) {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv.Close()
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := srv.Serve(ln2); !errors.Is(err, zico.ErrServerClosed) {
		t.Fatal(err)
	}
}

// TestShutdownTimeout: when Shutdown's context ends, hooks are cancelled
// and connections closed.
func TestShutdownTimeout(t *testing.T) {
	h := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	srv, _ := zico.NewServer(h, zico.ServerConfig{}, zico.Settings{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	c := dial(t, ln.Addr().String())
	c.send(codec.Hello, helloPayload("h1", "pw"))
	c.expect(codec.OK)
	data, _ := examplePayload()
	c.send(codec.Data, data)
	<-h.entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	c.closed()
}

func TestCloseWithoutServe(t *testing.T) {
	srv, _ := zico.NewServer(zico.HandlerFuncs{}, zico.ServerConfig{}, zico.Settings{})
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := zico.NewServer(nil, zico.ServerConfig{}, zico.Settings{}); err == nil {
		t.Fatal("no error without a handler")
	}
	if _, err := zico.NewServer(zico.HandlerFuncs{}, zico.ServerConfig{MaxConnections: -1}, zico.Settings{}); err == nil {
		t.Fatal("no error for a negative limit")
	}
}

// TestPanicInHook closes only its connection.
func TestPanicInHook(t *testing.T) {
	h := zico.HandlerFuncs{DataFunc: func(ctx context.Context, host string, traces []codec.Trace) error {
		if host == "bad" {
			panic("boom")
		}
		return nil
	}}
	srv, addr, logs := server(t, h, zico.ServerConfig{})
	good, bad := dial(t, addr), dial(t, addr)
	good.send(codec.Hello, helloPayload("good", ""))
	good.expect(codec.OK)
	bad.send(codec.Hello, helloPayload("bad", ""))
	bad.expect(codec.OK)
	data, _ := examplePayload()
	bad.send(codec.Data, data)
	bad.closed()
	good.send(codec.Data, data)
	good.expect(codec.OK)
	waitFor(t, "the fault", func() bool { return srv.Stats().Faults == 1 })
	// The fault is counted before it is logged.
	waitFor(t, "the panic logged", func() bool {
		for _, l := range logs.lines(t) {
			if l["level"] == "WARN" && l["host"] == "bad" {
				return true
			}
		}
		return false
	})
}

func TestTLS(t *testing.T) {
	cert := tlstest.New(t).TLS
	h := &recorder{}
	_, addr, _ := server(t, h, zico.ServerConfig{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	a := zicotest.NewAgent(addr, "h1", "pw")
	a.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
		return d.DialContext(ctx, "tcp", addr)
	}
	defer a.Close()
	r := exampleRecord()
	if err := a.Send(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	if _, batches := h.snapshot(); len(batches) != 1 || batches[0].Traces[0] != exampleDump {
		t.Fatalf("%+v", batches)
	}
}

// TestWhereSaysTLS: the receiver's start-up line (its Where) says TLS when
// it speaks TLS, and only then.
func TestWhereSaysTLS(t *testing.T) {
	var files pipeline.TLSFiles
	files.Cert, files.Key = tlstest.Files(t, t.TempDir())
	for _, tt := range []struct {
		tls  pipeline.TLSFiles
		want bool
	}{{files, true}, {pipeline.TLSFiles{}, false}} {
		r, err := zico.Factory().NewReceiver(&zico.FactoryConfig{Listen: "127.0.0.1:0", TLS: tt.tls}, pipeline.Settings{Name: "zico"})
		if err != nil {
			t.Fatal(err)
		}
		w := r.Where()
		r.(*zico.Receiver).Close()
		if got := strings.HasSuffix(w, " (TLS)"); got != tt.want || !strings.HasPrefix(w, "listening on 127.0.0.1:") {
			t.Errorf("TLS %v: Where %q", tt.want, w)
		}
	}
}

// TestListenPolicy: zico follows the listener policy: off loopback
// without TLS the configuration is refused naming listen and the fix;
// with insecure: true the receiver starts and warns once; on loopback it
// starts without a word.
func TestListenPolicy(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8640", ":8640", "[::]:8640", "192.0.2.1:8640"} {
		c := &zico.FactoryConfig{Listen: addr}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "listen "+addr) || !strings.Contains(err.Error(), "insecure: true") || !strings.Contains(err.Error(), "tls: {cert, key}") {
			t.Errorf("%s without tls: %v; want a refusal naming listen and the fix", addr, err)
		}
		c.Insecure = true
		if err := c.Validate(); err != nil {
			t.Errorf("%s with insecure: true: %v", addr, err)
		}
	}
	for _, off := range []bool{false, true} {
		c := &zico.FactoryConfig{Listen: "127.0.0.1:0"}
		if off {
			c.Listen, c.Insecure = "0.0.0.0:0", true
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		var logs logtest.Buffer
		r, err := zico.Factory().NewReceiver(c, pipeline.Settings{Name: "zico", Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		r.(*zico.Receiver).Close()
		warnings := strings.Count(logs.String(), "in plain text (insecure: true)")
		if want := map[bool]int{false: 0, true: 1}[off]; warnings != want {
			t.Errorf("off loopback %v: %d plain-text warnings, want %d:\n%s", off, warnings, want, logs.String())
		}
	}
}
