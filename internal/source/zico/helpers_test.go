package zico_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/zico"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Handler that records what it gets and can be told to
// fail or block.
type recorder struct {
	mu      sync.Mutex
	hellos  []codec.HelloRequest
	remotes []net.Addr
	batches []batch

	helloErr error
	dataErr  func(n int) error // for the n-th Data call (0-based)
	block    chan struct{}     // Data waits for it when set
	entered  chan struct{}     // signalled when Data is entered
}

type batch struct {
	Host   string
	Traces []string // dumps
	Info   zico.Info
}

func (r *recorder) Hello(ctx context.Context, req codec.HelloRequest, remote net.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hellos = append(r.hellos, req)
	r.remotes = append(r.remotes, remote)
	return r.helloErr
}

func (r *recorder) Data(ctx context.Context, host string, traces []codec.Trace) error {
	if r.entered != nil {
		r.entered <- struct{}{}
	}
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	info, _ := zico.InfoFromContext(ctx)
	b := batch{Host: host, Info: info}
	for _, t := range traces {
		b.Traces = append(b.Traces, dumpTrace(t))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.batches)
	r.batches = append(r.batches, b)
	if r.dataErr != nil {
		return r.dataErr(n)
	}
	return nil
}

func (r *recorder) snapshot() ([]codec.HelloRequest, []batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]codec.HelloRequest(nil), r.hellos...), append([]batch(nil), r.batches...)
}

// dumpTrace names the records of a trace in walk order.
func dumpTrace(t codec.Trace) string {
	var b bytes.Buffer
	t.Root.Walk(func(r *codec.TraceRecord, depth int) bool {
		b.WriteString(r.Operation())
		for _, a := range r.Attrs {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
		}
		b.WriteString(";")
		return true
	})
	return b.String()
}

// logBuffer collects JSON log lines.
type logBuffer struct{ logtest.Buffer }

func (l *logBuffer) lines(t *testing.T) []map[string]any { return l.Lines(t) }

// server starts a Server on loopback; it is shut down when the test ends.
func server(t *testing.T, h zico.Handler, cfg zico.ServerConfig) (*zico.Server, string, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	log := logs.Logger()
	srv, err := zico.NewServer(h, cfg, zico.Settings{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, zico.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return srv, ln.Addr().String(), logs
}

// client is a raw ZICO connection.
type client struct {
	t    *testing.T
	conn *net.TCPConn
	fr   *codec.FrameReader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, conn: conn.(*net.TCPConn), fr: codec.NewFrameReader(conn, 0)}
}

func (c *client) raw(b []byte) {
	c.t.Helper()
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) send(typ codec.Type, payload []byte) {
	c.t.Helper()
	c.raw(codec.AppendFrame(nil, typ, payload))
}

// reply reads the next reply.
func (c *client) reply() codec.Type {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := c.fr.Next()
	if err != nil {
		c.t.Fatalf("no reply: %v", err)
	}
	if len(f.Payload) != 0 {
		c.t.Fatalf("reply %s with a payload", f.Type)
	}
	return f.Type
}

func (c *client) expect(want codec.Type) {
	c.t.Helper()
	if got := c.reply(); got != want {
		c.t.Fatalf("reply %s, want %s", got, want)
	}
}

// closed checks that the server closed the connection with no more
// replies.
func (c *client) closed() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [64]byte
	n, err := c.conn.Read(b[:])
	if n != 0 || !errors.Is(err, io.EOF) && !isReset(err) {
		c.t.Fatalf("connection not closed: %d bytes (% X), %v", n, b[:n], err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// open checks that the connection still answers.
func (c *client) open() {
	c.t.Helper()
	c.send(codec.Ping, nil)
	c.expect(codec.Pong)
}

func helloPayload(host, auth string) []byte {
	return zicotest.HelloPayload(host, auth, time.UnixMilli(1700000000000))
}

var clock = time.UnixMilli(1700000000000)

// examplePayload is ZICO.md §5's first DATA packet, with its builder for
// the next packets of the connection.
func examplePayload() ([]byte, *zicotest.Payload) {
	reg := zicotest.NewRegistry()
	p := zicotest.NewPayload(reg)
	r := exampleRecord()
	return p.Append(nil, &r), p
}

func exampleRecord() codec.TraceRecord {
	r := zicotest.Root(zicotest.Record("C", "m", "()V", 1500000), "HTTP", clock)
	r.Attrs = []codec.Attr{{Key: "STATUS", Value: codec.Value{Kind: codec.KindInt, Int: 200}}}
	return r
}

const exampleDump = "C.m()V STATUS=200;"

// waitFor polls cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	servicetest.WaitFor(t, 30*time.Second, what, cond)
}
