package forward

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var cat = record.Builtin()

// allMapping maps every built-in type, so that every corpus record can be
// sent with kdb-tcp.
var allMapping = func() *kdb.Mapping {
	types := map[int32]*record.Type{}
	for i, t := range cat.Types() {
		types[int32(i+1)] = t
	}
	m, err := kdb.NewMapping(types)
	if err != nil {
		panic(err)
	}
	return m
}()

var cmpRecords = []cmp.Option{
	cmp.Comparer(func(a, b record.Value) bool { return a.Equal(b) }),
	cmp.Comparer(func(a, b *record.Type) bool { return a == b || (a != nil && b != nil && a.Name == b.Name) }),
}

// receiver is a loopback TCP server that decodes what it is sent, one
// decoder (and so one registry) per connection, like a real receiver.
type receiver struct {
	t       testing.TB
	proto   Protocol
	mapping *kdb.Mapping
	// abortFirst resets the first connection (RST) after it has read that
	// many bytes.
	abortFirst int
	discard    bool // read and throw away (benchmarks)

	addr string

	mu    sync.Mutex
	conns [][]record.Record // records by connection, in order of acceptance
	errs  []error
	ln    net.Listener
	open  map[net.Conn]bool
	wg    sync.WaitGroup
}

func newReceiver(t testing.TB, proto Protocol) *receiver {
	r := &receiver{t: t, proto: proto, mapping: allMapping, addr: "127.0.0.1:0"}
	return r
}

func (r *receiver) url() string { return r.proto.String() + "://" + r.addr }

// start listens (again, on the same port after a stop).
func (r *receiver) start() {
	r.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may take a moment to be free again
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.ln = ln
	r.addr = ln.Addr().String()
	if r.open == nil {
		r.open = map[net.Conn]bool{}
	}
	r.mu.Unlock()
	r.wg.Add(1)
	go r.accept(ln)
}

// stop closes the listener and every connection and waits for the
// goroutines.
func (r *receiver) stop() {
	r.mu.Lock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for c := range r.open {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// goAway stops listening and half-closes every open connection, as a
// receiver that shuts down but reads what its peers still send: the sender
// sees its connection end, and what it wrote before it noticed arrives.
// start listens again.
func (r *receiver) goAway() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for c := range r.open {
		c.(*net.TCPConn).CloseWrite()
	}
}

func (r *receiver) accept(ln net.Listener) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.ln != ln { // stopped meanwhile: stop could not close c
			r.mu.Unlock()
			c.Close()
			return
		}
		idx := len(r.conns)
		r.conns = append(r.conns, nil)
		r.open[c] = true
		r.mu.Unlock()
		r.wg.Add(1)
		go r.serve(c, idx)
	}
}

func (r *receiver) serve(c net.Conn, idx int) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.open, c)
		r.mu.Unlock()
		c.Close()
	}()
	if r.abortFirst > 0 {
		// Fixing the buffer turns off autotuning: what the sender can
		// have in flight stays at its send buffer plus this.
		c.(*net.TCPConn).SetReadBuffer(64 << 10)
	}
	if r.discard {
		io.Copy(io.Discard, c)
		return
	}
	var decode func([]byte, *record.Batch) (int, error)
	if r.proto == Kieker {
		d := kieker.NewDecoder(kieker.Options{Inline: true, Catalog: cat})
		decode = d.Decode
	} else {
		d := kdb.NewDecoder(r.mapping, kdb.Options{})
		decode = d.Decode
	}
	var (
		buf   []byte
		chunk = make([]byte, 32<<10)
		b     record.Batch
		read  int
	)
	for {
		n, err := c.Read(chunk)
		read += n
		buf = append(buf, chunk[:n]...)
		b.Reset()
		used, derr := decode(buf, &b)
		buf = buf[:copy(buf, buf[used:])]
		r.mu.Lock()
		for i := range b.Records {
			r.conns[idx] = append(r.conns[idx], b.Records[i].Clone())
		}
		if derr != nil {
			r.errs = append(r.errs, derr)
		}
		r.mu.Unlock()
		if derr != nil {
			return
		}
		if idx == 0 && r.abortFirst > 0 && read >= r.abortFirst {
			c.(*net.TCPConn).SetLinger(0)
			return
		}
		if err != nil {
			if len(buf) > 0 && !errors.Is(err, net.ErrClosed) {
				r.mu.Lock()
				r.errs = append(r.errs, errors.New("connection closed inside a record"))
				r.mu.Unlock()
			}
			return
		}
	}
}

// records returns every record received, connection by connection.
func (r *receiver) records() []record.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record.Record
	for _, c := range r.conns {
		out = append(out, c...)
	}
	return out
}

func (r *receiver) connRecords(i int) []record.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.conns) {
		return nil
	}
	return append([]record.Record(nil), r.conns[i]...)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.conns {
		n += len(c)
	}
	return n
}

func (r *receiver) decodeErrors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// waitFor waits until at least n records arrived.
func (r *receiver) waitFor(n int) {
	r.t.Helper()
	r.waitUntil(n, r.count)
}

// waitConn waits until connection i brought at least n records.
func (r *receiver) waitConn(i, n int) {
	r.t.Helper()
	r.waitUntil(n, func() int { return len(r.connRecords(i)) })
}

func (r *receiver) waitUntil(n int, count func() int) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for count() < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("receiver got %d records, want %d (decode errors: %v)", r.count(), n, r.decodeErrors())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLog waits until the log holds substr.
func waitLog(t testing.TB, logs *logBuffer, substr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); logs.count(substr) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged within 10 s:\n%s", substr, logs.String())
		}
	}
}

// logBuffer collects log output (text, as the forward sink's tests read
// it).
type logBuffer struct{ logtest.Buffer }

func (l *logBuffer) count(substr string) int { return strings.Count(l.String(), substr) }

func newLogger(buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// events returns n BeforeOperationEvents whose orderIndex runs from first,
// with a few distinct strings (so the registry is exercised and reused).
func events(first, n int) *record.Batch {
	typ := cat.Lookup(record.BeforeOperationEvent)
	b := &record.Batch{}
	for i := first; i < first+n; i++ {
		r := b.Add(typ, int64(1_700_000_000_000_000_000+i))
		r.Values[0] = record.IntValue(int64(i) * 1000)
		r.Values[1] = record.IntValue(int64(i / 10))
		r.Values[2] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue(opNames[i%len(opNames)])
		r.Values[4] = record.StringValue(classNames[i%len(classNames)])
	}
	return b
}

var opNames, classNames = func() ([]string, []string) {
	var ops, classes []string
	for i := range 37 {
		ops = append(ops, "public void org.example.service.Component"+strconv.Itoa(i)+".operation(java.lang.String, int)")
	}
	for i := range 11 {
		classes = append(classes, "org.example.service.Component"+strconv.Itoa(i))
	}
	return ops, classes
}()

// orderIndexes returns the set of orderIndex values of BeforeOperationEvents
// and how many times each was seen.
func orderIndexes(recs []record.Record) map[int64]int {
	m := map[int64]int{}
	for i := range recs {
		if v, ok := recs[i].Field("orderIndex"); ok {
			m[v.Int()]++
		}
	}
	return m
}
