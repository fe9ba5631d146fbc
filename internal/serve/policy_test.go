package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/sink/forward"
)

// ackSource is a broker-like receiver: it hands on count batches of
// ackBatch records, each with a Done callback (its acknowledgement).
type ackSource struct {
	n      int
	set    pipeline.Settings
	handed atomic.Int64 // batches Consume returned for
	acked  atomic.Int64 // Done(nil)
	nacked atomic.Int64 // Done(err)
}

const ackBatch = 10

func (r *ackSource) Where() string { return "acks" }
func (r *ackSource) Close() error  { return nil }
func (r *ackSource) Run(ctx context.Context, out pipeline.Consumer) error {
	typ := r.set.Catalog.Lookup(record.TraceMetadata)
	for i := range r.n {
		b := &record.Batch{}
		for j := range ackBatch {
			b.Add(typ, int64(i)).Values[0] = record.IntValue(int64(i*ackBatch + j))
		}
		b.Done = append(b.Done, func(err error) {
			if err != nil {
				r.nacked.Add(1)
			} else {
				r.acked.Add(1)
			}
		})
		if err := out.Consume(ctx, b); err != nil {
			return nil // shutting down
		}
		r.handed.Add(1)
	}
	<-ctx.Done()
	return nil
}

// target is a Kieker TCP receiver that counts the records it decodes.
type target struct {
	ln      net.Listener
	records atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func listenTarget(t *testing.T, addr string) *target {
	t.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{ln: ln}
	tg.wg.Add(1)
	go func() {
		defer tg.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tg.mu.Lock()
			tg.conns = append(tg.conns, c)
			tg.mu.Unlock()
			tg.wg.Add(1)
			go func() {
				defer tg.wg.Done()
				defer c.Close()
				d := kieker.NewDecoder(kieker.Options{Inline: true, Catalog: record.Builtin()})
				var buf []byte
				chunk := make([]byte, 32<<10)
				var b record.Batch
				for {
					n, err := c.Read(chunk)
					buf = append(buf, chunk[:n]...)
					b.Reset()
					used, derr := d.Decode(buf, &b)
					buf = buf[:copy(buf, buf[used:])]
					tg.records.Add(int64(b.Len()))
					if err != nil || derr != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		tg.mu.Lock()
		for _, c := range tg.conns {
			c.Close()
		}
		tg.mu.Unlock()
		tg.wg.Wait()
	})
	return tg
}

// deadTarget returns an address nothing listens on (yet).
func deadTarget(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// waitFor waits for cond with a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	servicetest.WaitFor(t, 30*time.Second, what, cond)
}

func buildWithAcks(t *testing.T, yaml string, log *slog.Logger) (*Server, *ackSource) {
	t.Helper()
	src := &ackSource{}
	f := DefaultFactories()
	f.Receivers = append(f.Receivers, pipeline.NewReceiverFactory("acks", func() *toyConfig { return &toyConfig{Count: 1} },
		func(c *toyConfig, set pipeline.Settings) (pipeline.Receiver, error) {
			src.n, src.set = c.Count, set
			return src, nil
		}))
	cfg := parse(t, yaml)
	cfg.DataDir = t.TempDir()
	s, err := Build(cfg, Settings{Factories: f, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return s, src
}

// run runs s; the returned stop (also a cleanup) ends it and checks that
// it ended without error.
func run(t *testing.T, s *Server) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("run: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Error("the bridge did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type forwardStats interface{ Stats() forward.Stats }

// TestDurableForwardNeverDrops: a durable forward sink (the default
// policy) whose target is down at first loses nothing: it retries, the
// engine's queues fill and the receiver is held up with its batches
// unacknowledged; once the target is up every record arrives and every
// batch is acknowledged. A best-effort one never holds the receiver up:
// it drops and counts.
func TestDurableForwardNeverDrops(t *testing.T) {
	const batches = 200
	t.Run("durable", func(t *testing.T) {
		addr := deadTarget(t)
		s, src := buildWithAcks(t, fmt.Sprintf(`queue_batches: 2
receivers: [{type: acks, name: broker, count: %d}]
sinks: [{type: forward, name: fwd, url: "kieker-tcp://%s", queue_batches: 2}]
`, batches, addr), nil)
		stop := run(t, s)
		fw := s.Built["fwd"].(forwardStats)
		// The receiver is held up: with the target down, the queues (two
		// batches each) fill and Consume waits; nothing is acknowledged.
		waitFor(t, "the receiver to hand on its first batches", func() bool { return src.handed.Load() >= 1 })
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && src.handed.Load() < batches; {
			time.Sleep(20 * time.Millisecond)
		}
		if h, a, n := src.handed.Load(), src.acked.Load(), src.nacked.Load(); h >= batches || a != 0 || n != 0 {
			t.Fatalf("target down: %d of %d batches handed on, %d acknowledged, %d failed; want the receiver held up, none acknowledged", h, batches, a, n)
		}
		if d := fw.Stats().Dropped; d != 0 {
			t.Fatalf("target down: %d records dropped", d)
		}
		tg := listenTarget(t, addr)
		waitFor(t, "every batch to be acknowledged", func() bool { return src.acked.Load()+src.nacked.Load() == batches })
		if n := src.nacked.Load(); n != 0 {
			t.Fatalf("%d batches failed", n)
		}
		waitFor(t, "every record at the target", func() bool { return tg.records.Load() >= batches*ackBatch })
		if got, d := tg.records.Load(), fw.Stats().Dropped; got != batches*ackBatch || d != 0 {
			t.Fatalf("target got %d records of %d, %d dropped", got, batches*ackBatch, d)
		}
		stop() // before the target goes
	})
	t.Run("best-effort", func(t *testing.T) {
		addr := deadTarget(t)
		s, src := buildWithAcks(t, fmt.Sprintf(`queue_batches: 2
receivers: [{type: acks, name: broker, count: %d}]
sinks: [{type: forward, name: fwd, url: "kieker-tcp://%s", queue_batches: 2, policy: best-effort}]
`, batches, addr), nil)
		run(t, s)
		fw := s.Built["fwd"].(forwardStats)
		waitFor(t, "the receiver to hand on every batch", func() bool { return src.handed.Load() == batches })
		waitFor(t, "the sink to drop and count", func() bool { return fw.Stats().Dropped > 0 })
	})
}

// TestForwardBlockIsDeprecated: a configuration that still has the
// forward sink's `block:` builds, with a warning that the policy decides.
func TestForwardBlockIsDeprecated(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	buildWithAcks(t, "receivers: [{type: acks, count: 1}]\nsinks: [{type: forward, name: fwd, url: \"kieker-tcp://127.0.0.1:9\", block: true}]\n", log)
	if !bytes.Contains(buf.Bytes(), []byte("block is deprecated")) || !bytes.Contains(buf.Bytes(), []byte("policy")) {
		t.Fatalf("no deprecation warning: %s", buf.String())
	}
}
