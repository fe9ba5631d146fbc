package tcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var catalog = record.Builtin()

// collector is a consumer that keeps clones of every record it is given.
type collector struct {
	mu     sync.Mutex
	cond   *sync.Cond
	recs   []record.Record
	delay  time.Duration // sleep per batch
	block  chan struct{} // when set, Consume waits for it to be closed
	err    error         // returned by every Consume
	blocks int           // batches that blocked
}

func newCollector() *collector {
	c := &collector{}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *collector) Consume(ctx context.Context, b *record.Batch) error {
	if c.block != nil {
		c.mu.Lock()
		c.blocks++
		c.mu.Unlock()
		<-c.block
	}
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range b.Records {
		c.recs = append(c.recs, b.Records[i].Clone())
	}
	c.cond.Broadcast()
	return c.err
}

func (c *collector) records() []record.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]record.Record(nil), c.recs...)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// wait waits until the collector holds at least n records.
func (c *collector) wait(t testing.TB, n int, timeout time.Duration) []record.Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c.len() >= n {
			return c.records()
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("collected %d records, want %d within %s", c.len(), n, timeout)
	return nil
}

// logBuffer captures JSON log lines.
type logBuffer struct{ logtest.Buffer }

func (l *logBuffer) logger() *slog.Logger { return l.Logger() }

// lines returns the parsed log lines whose message contains msg.
func (l *logBuffer) lines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range l.Lines(t) {
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

// env is a receiver under test with its collector, logs and metrics.
type env struct {
	r      *Receiver
	col    *collector
	logs   *logBuffer
	reg    *metrics.Registry
	cancel context.CancelFunc
	done   chan error
}

// start creates a receiver from cfg (Address defaults to 127.0.0.1:0) and
// runs it into out (the collector when nil) until the test ends.
func start(t testing.TB, cfg Config, out func(*collector) pipeline.Consumer) *env {
	t.Helper()
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1:0"
	}
	if cfg.Mode == Dual && cfg.RegistryAddress == "" {
		cfg.RegistryAddress = "127.0.0.1:0"
	}
	e := &env{col: newCollector(), logs: &logBuffer{}, reg: metrics.New(), done: make(chan error, 1)}
	r, err := New(cfg, Settings{Logger: e.logs.logger(), Metrics: e.reg.Receiver(cfg.Name)})
	if err != nil {
		t.Fatal(err)
	}
	e.r = r
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	var consumer pipeline.Consumer = e.col
	if out != nil {
		consumer = out(e.col)
	}
	go func() { e.done <- r.Run(ctx, consumer) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of cancel")
		}
	})
	return e
}

// stop cancels Run and returns its error.
func (e *env) stop(t testing.TB) error {
	t.Helper()
	e.cancel()
	select {
	case err := <-e.done:
		e.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
		return nil
	}
}

// counter returns the value of the metric family name for this receiver.
func (e *env) counter(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	servicetest.WaitFor(t, timeout, what, cond)
}

func dial(t testing.TB, addr net.Addr) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	t.Cleanup(func() { tc.Close() })
	return tc
}

// sendPieces writes data in random pieces of 1–13 bytes, each its own
// write with TCP_NODELAY, sleeping now and then so they arrive split.
func sendPieces(t testing.TB, c *net.TCPConn, data []byte, seed uint64) {
	t.Helper()
	if err := c.SetNoDelay(true); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for len(data) > 0 {
		n := min(1+rng.IntN(13), len(data))
		if _, err := c.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
		if rng.IntN(40) == 0 {
			time.Sleep(time.Duration(50+rng.IntN(500)) * time.Microsecond)
		}
	}
}

// waitClosed reads from c until the peer closes it (EOF or reset).
func waitClosed(t testing.TB, c net.Conn, timeout time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	var b [64]byte
	for {
		_, err := c.Read(b[:])
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection still open after %s", timeout)
		}
		return
	}
}

// corpus reads a file of the shared corpus.
var corpus = testcorpus.Read

// recString renders a record for comparisons.
func recString(r *record.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%d{", r.Type.ShortName(), r.LoggingTimestamp)
	for i, f := range r.Type.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
		b.WriteString("=")
		v := r.Values[i]
		if l := v.List(); l != nil {
			b.WriteString("[")
			for j, it := range l.Items {
				if j > 0 {
					b.WriteString(" ")
				}
				fmt.Fprintf(&b, "%q", it.Format(l.Elem))
			}
			b.WriteString("]")
			continue
		}
		if f.Kind == record.String {
			fmt.Fprintf(&b, "%q", v.Str())
		} else {
			fmt.Fprintf(&b, "%d", v.Bits())
		}
	}
	b.WriteString("}")
	return b.String()
}

func recStrings(rs []record.Record) []string { return recordtest.Strings(rs, recString) }

func countTypes(rs []record.Record) map[string]int { return recordtest.CountTypes(rs) }

// decodeKieker decodes a single-socket stream in one go, as a reference.
func decodeKieker(t testing.TB, data []byte) ([]record.Record, int64, error) {
	t.Helper()
	d := kieker.NewDecoder(kieker.Options{Inline: true})
	var b record.Batch
	n, err := d.Decode(data, &b)
	return b.Records, int64(n), err
}

// kdbMapping is the default KDB mapping.
func kdbMapping(t testing.TB) *kdb.Mapping {
	t.Helper()
	m, err := kdb.DefaultMapping(catalog)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// kdbRecords encodes n BeforeOperationEvents of client c in the KDB binary
// dialect: traceId = c, orderIndex = i.
func kdbRecords(t testing.TB, m *kdb.Mapping, c, from, n int) []byte {
	t.Helper()
	enc := kdb.NewEncoder(m, kdb.Options{})
	typ := catalog.Lookup(record.BeforeOperationEvent)
	var b record.Batch
	var out []byte
	for i := from; i < from+n; i++ {
		b.Reset()
		r := b.Add(typ, record.NoTimestamp)
		r.Values[0] = record.IntValue(int64(1000000 + i))
		r.Values[1] = record.IntValue(int64(c))
		r.Values[2] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue("public void com.example.Service.op(int)")
		r.Values[4] = record.StringValue("com.example.Service")
		var err error
		if out, err = enc.AppendBinary(out, r); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// perClient groups KDB test records by traceId and checks that each client's
// orderIndex runs from 0 to n-1 in order.
func checkPerClient(t testing.TB, recs []record.Record, clients map[int]int) {
	t.Helper()
	next := map[int]int{}
	for i := range recs {
		c := int(recs[i].Values[1].Int())
		want, ok := clients[c]
		if !ok {
			t.Fatalf("record from unexpected client %d", c)
		}
		if got := int(recs[i].Values[2].Int()); got != next[c] {
			t.Fatalf("client %d: record %d has orderIndex %d (out of order or lost)", c, next[c], got)
		}
		next[c]++
		if next[c] > want {
			t.Fatalf("client %d: more than %d records", c, want)
		}
	}
	for c, want := range clients {
		if next[c] != want {
			t.Errorf("client %d: %d records arrived, want %d", c, next[c], want)
		}
	}
}
