package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// queued runs a pipeline.Queue in front of the collector until the test
// ends, so the receiver hands batches on with Emit.
func queued(t *testing.T) func(*collector) pipeline.Consumer {
	return func(c *collector) pipeline.Consumer {
		q := pipeline.NewQueue(4, c, nil)
		done := make(chan struct{})
		go func() { q.Run(context.Background()); close(done) }()
		t.Cleanup(func() {
			q.Close()
			<-done
		})
		return q
	}
}

// TestKDBConcurrentClients: 8 clients × 5000 records into a queue; every
// record arrives, per connection in order.
func TestKDBConcurrentClients(t *testing.T) {
	m := kdbMapping(t)
	e := start(t, Config{Name: "kdb", NewDecoder: KDBDecoder(m, kdb.Options{})}, queued(t))
	const clients, n = 8, 5000
	var wg sync.WaitGroup
	want := map[int]int{}
	for c := range clients {
		want[c] = n
		data := kdbRecords(t, m, c, 0, n)
		conn := dial(t, e.r.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for len(data) > 0 {
				k := min(1+rng.IntN(8192), len(data))
				if _, err := conn.Write(data[:k]); err != nil {
					t.Error(err)
					return
				}
				data = data[k:]
			}
			conn.Close()
		}()
	}
	wg.Wait()
	got := e.col.wait(t, clients*n, 20*time.Second)
	checkPerClient(t, got, want)
	waitFor(t, "connections to close", 5*time.Second, func() bool { return e.r.Stats().Open == 0 })
	if st := e.r.Stats(); st.Connections != clients || st.DecodeErrors != 0 || st.Records != clients*n {
		t.Errorf("stats %+v", st)
	}
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestKDBBadClients: a bad client among good ones is closed alone; the
// records it sent before the bad bytes are kept.
func TestKDBBadClients(t *testing.T) {
	m := kdbMapping(t)
	recSize := len(kdbRecords(t, m, 0, 0, 1))
	garbage := make([]byte, 500)
	rand.NewChaCha8([32]byte{9}).Read(garbage)
	copy(garbage, "\xde\xad\xbe\xef") // an id no mapping has
	unknownID := binary.BigEndian.AppendUint32(nil, 999)
	unknownID = append(unknownID, make([]byte, 40)...)
	oversized := binary.BigEndian.AppendUint32(nil, 1) // BeforeOperationEvent
	oversized = append(oversized, make([]byte, 8+8+4)...)
	oversized = binary.BigEndian.AppendUint32(oversized, 0x7fffffff)
	oversized = append(oversized, "abc"...)

	tests := []struct {
		name   string
		client int
		good   int
		bad    []byte
		reason string
	}{
		{"garbage", 100, 10, garbage, "unknown type id -559038737"},
		{"unknown type id", 101, 20, unknownID, "unknown type id 999"},
		{"oversized string", 102, 30, oversized, "over the limit"},
	}
	e := start(t, Config{NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
	want := map[int]int{}
	var wg sync.WaitGroup
	for c := range 4 {
		want[c] = 3000
		data := kdbRecords(t, m, c, 0, 3000)
		conn := dial(t, e.r.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(data) > 0 {
				k := min(997, len(data))
				if _, err := conn.Write(data[:k]); err != nil {
					t.Error(err)
					return
				}
				data = data[k:]
				time.Sleep(50 * time.Microsecond)
			}
			conn.Close()
		}()
	}
	bad := map[string]net.Conn{}
	for _, tt := range tests {
		want[tt.client] = tt.good
		conn := dial(t, e.r.Addr())
		bad[tt.name] = conn
		data := append(kdbRecords(t, m, tt.client, 0, tt.good), tt.bad...)
		if _, err := conn.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		waitClosed(t, bad[tt.name], 5*time.Second)
	}
	wg.Wait()
	got := e.col.wait(t, 4*3000+10+20+30, 20*time.Second)
	waitFor(t, "connections to close", 5*time.Second, func() bool { return e.r.Stats().Open == 0 })
	checkPerClient(t, e.col.records(), want)
	_ = got
	if n := e.r.Stats().DecodeErrors; n != 3 {
		t.Errorf("%d decode errors, want 3", n)
	}
	lines := e.logs.lines(t, "malformed stream")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3: %v", len(lines), lines)
	}
	for _, tt := range tests {
		peer := bad[tt.name].LocalAddr().String()
		found := false
		for _, l := range lines {
			if l["peer"] == peer {
				found = true
				if l["offset"] != float64(tt.good*recSize) || !strings.Contains(l["err"].(string), tt.reason) {
					t.Errorf("%s: log line %v, want offset %d and %q", tt.name, l, tt.good*recSize, tt.reason)
				}
			}
		}
		if !found {
			t.Errorf("%s: no log line names peer %s", tt.name, peer)
		}
	}
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestDisconnectMidRecord: complete records are handed on, the cut one is
// logged once with its offset and the bytes dropped, and counted.
func TestDisconnectMidRecord(t *testing.T) {
	m := kdbMapping(t)
	for _, pieces := range []bool{false, true} {
		t.Run(fmt.Sprint("pieces=", pieces), func(t *testing.T) {
			e := start(t, Config{NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
			data := kdbRecords(t, m, 1, 0, 11)
			recSize := len(data) / 11
			cut := data[:10*recSize+recSize/2]
			c := dial(t, e.r.Addr())
			if pieces {
				sendPieces(t, c, cut, 5)
			} else if _, err := c.Write(cut); err != nil {
				t.Fatal(err)
			}
			c.Close()
			waitFor(t, "the decode error", 5*time.Second, func() bool { return e.r.Stats().DecodeErrors == 1 })
			checkPerClient(t, e.col.records(), map[int]int{1: 10})
			lines := e.logs.lines(t, "closed inside a record")
			if len(lines) != 1 {
				t.Fatalf("%d log lines, want 1", len(lines))
			}
			if l := lines[0]; l["offset"] != float64(10*recSize) || l["dropped_bytes"] != float64(recSize/2) || l["peer"] != c.LocalAddr().String() {
				t.Errorf("log line %v, want offset %d, %d bytes dropped", l, 10*recSize, recSize/2)
			}
			if err := e.stop(t); err != nil {
				t.Fatal(err)
			}
			if n := e.counter(t, "tracebridge_decode_errors_total"); n != 1 {
				t.Errorf("decode error metric %v", n)
			}
		})
	}
}

// panicky panics on a record with id 0x7fffffff and otherwise decodes KDB.
type panicky struct{ Decoder }

func (p panicky) Decode(buf []byte, b *record.Batch) (int, error) {
	if i := bytes.Index(buf, []byte{0x7f, 0xff, 0xff, 0xff}); i >= 0 {
		var s []int
		_ = s[i+1] // index out of range
	}
	return p.Decoder.Decode(buf, b)
}

func TestDecoderPanic(t *testing.T) {
	m := kdbMapping(t)
	kd := KDBDecoder(m, kdb.Options{})
	e := start(t, Config{NewDecoder: func() Decoder { return panicky{kd()} }}, nil)
	bad := dial(t, e.r.Addr())
	if _, err := bad.Write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, bad, 5*time.Second)
	good := dial(t, e.r.Addr())
	if _, err := good.Write(kdbRecords(t, m, 3, 0, 100)); err != nil {
		t.Fatal(err)
	}
	good.Close()
	checkPerClient(t, e.col.wait(t, 100, 5*time.Second), map[int]int{3: 100})
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
	lines := e.logs.lines(t, "panic while decoding")
	if len(lines) != 1 || !strings.Contains(lines[0]["err"].(string), "index out of range") {
		t.Errorf("log lines %v", lines)
	}
	if n := e.r.Stats().DecodeErrors; n != 1 {
		t.Errorf("%d decode errors, want 1", n)
	}
}

// TestLargeRecord: a record larger than the read buffer grows it (up to the
// decoder's limit) and arrives; records after it too.
func TestLargeRecord(t *testing.T) {
	m := kdbMapping(t)
	e := start(t, Config{ReadBuffer: 64, NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
	typ := catalog.Lookup(record.BeforeOperationEvent)
	var b record.Batch
	r := b.Add(typ, record.NoTimestamp)
	r.Values[1] = record.IntValue(7)
	r.Values[3] = record.StringValue(strings.Repeat("ü", 20000))
	data, err := kdb.AppendBinary(nil, 1, r)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, kdbRecords(t, m, 8, 0, 50)...)
	c := dial(t, e.r.Addr())
	sendPieces(t, c, data[:5000], 1)
	if _, err := c.Write(data[5000:]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got := e.col.wait(t, 51, 5*time.Second)
	if got[0].Values[3].Str() != r.Values[3].Str() {
		t.Error("large string garbled")
	}
	checkPerClient(t, got[1:], map[int]int{8: 50})
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
}

// neverDone is a decoder that never completes a unit.
type neverDone struct{}

func (neverDone) Decode([]byte, *record.Batch) (int, error) { return 0, nil }
func (neverDone) MaxUnit() int                              { return 100 }

// TestUnitOverMaxUnit: a unit the decoder cannot finish within MaxUnit
// bytes ends the connection.
func TestUnitOverMaxUnit(t *testing.T) {
	e := start(t, Config{ReadBuffer: 16, NewDecoder: func() Decoder { return neverDone{} }}, nil)
	c := dial(t, e.r.Addr())
	if _, err := c.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c, 5*time.Second)
	waitFor(t, "the decode error", 5*time.Second, func() bool { return e.r.Stats().DecodeErrors == 1 })
	lines := e.logs.lines(t, "malformed stream")
	if len(lines) != 1 || !strings.Contains(lines[0]["err"].(string), "larger than 100 bytes") {
		t.Errorf("log lines %v", lines)
	}
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestTransform: the transform sees each decode call's new records before
// they are handed on.
func TestTransform(t *testing.T) {
	m := kdbMapping(t)
	e := start(t, Config{
		NewDecoder: KDBDecoder(m, kdb.Options{}),
		Transform: func(b *record.Batch, from int) {
			for i := from; i < b.Len(); i++ {
				v := &b.Records[i].Values[0]
				*v = record.IntValue(v.Int() * 1000)
			}
		},
	}, nil)
	c := dial(t, e.r.Addr())
	sendPieces(t, c, kdbRecords(t, m, 1, 0, 200), 3)
	c.Close()
	got := e.col.wait(t, 200, 5*time.Second)
	for i := range got {
		if ts := got[i].Values[0].Int(); ts != int64(1000000+i)*1000 {
			t.Fatalf("record %d: timestamp %d, want %d", i, ts, int64(1000000+i)*1000)
		}
	}
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestConnectionLimit: a connection over MaxConnections is closed at once,
// logged and counted; a slot that frees up is used again.
func TestConnectionLimit(t *testing.T) {
	m := kdbMapping(t)
	e := start(t, Config{MaxConnections: 2, NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
	c1 := dial(t, e.r.Addr())
	c2 := dial(t, e.r.Addr())
	for i, c := range []net.Conn{c1, c2} {
		if _, err := c.Write(kdbRecords(t, m, i, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	e.col.wait(t, 2, 5*time.Second)
	c3 := dial(t, e.r.Addr())
	waitClosed(t, c3, 5*time.Second)
	if st := e.r.Stats(); st.Rejected != 1 || st.Open != 2 {
		t.Errorf("stats %+v, want 1 rejected, 2 open", st)
	}
	if lines := e.logs.lines(t, "connection limit"); len(lines) != 1 || lines[0]["peer"] != c3.LocalAddr().String() {
		t.Errorf("log lines %v", lines)
	}
	c1.Close()
	waitFor(t, "a slot to free up", 5*time.Second, func() bool { return e.r.Stats().Open == 1 })
	c4 := dial(t, e.r.Addr())
	if _, err := c4.Write(kdbRecords(t, m, 4, 0, 1)); err != nil {
		t.Fatal(err)
	}
	e.col.wait(t, 3, 5*time.Second)
	c2.Close()
	c4.Close()
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := e.counter(t, "tracebridge_connections_rejected_total"); n != 1 {
		t.Errorf("rejected metric %v", n)
	}
}

// TestBackPressure: while the consumer is blocked, the receiver stops
// reading, so what it has read stays far below what the client tried to
// send.
func TestBackPressure(t *testing.T) {
	m := kdbMapping(t)
	e := start(t, Config{NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
	e.col.block = make(chan struct{})
	chunk := kdbRecords(t, m, 1, 0, 1000)
	c := dial(t, e.r.Addr())
	const attempt = 256 << 20
	sent := 0
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for sent < attempt {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	read := e.r.Stats().Bytes
	t.Logf("client tried %d MiB, the kernel took %d KiB, the receiver read %d KiB", attempt>>20, sent>>10, read>>10)
	if sent >= attempt {
		t.Fatalf("the client sent all %d bytes: no back-pressure", attempt)
	}
	if read > 4*DefaultReadBuffer {
		t.Errorf("the receiver read %d bytes while its consumer was blocked, want at most a few buffers", read)
	}
	c.Close()
	close(e.col.block)
	if err := e.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestConsumerErrors: an ordinary consumer error drops the batch and goes
// on; pipeline.ErrClosed stops the receiver.
func TestConsumerErrors(t *testing.T) {
	m := kdbMapping(t)
	t.Run("dropped", func(t *testing.T) {
		e := start(t, Config{NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
		e.col.err = fmt.Errorf("disk full")
		c := dial(t, e.r.Addr())
		if _, err := c.Write(kdbRecords(t, m, 1, 0, 10)); err != nil {
			t.Fatal(err)
		}
		c.Close()
		e.col.wait(t, 10, 5*time.Second)
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		if lines := e.logs.lines(t, "consumer refused"); len(lines) == 0 {
			t.Error("consumer error not logged")
		}
	})
	t.Run("closed", func(t *testing.T) {
		var q *pipeline.Queue
		e := start(t, Config{NewDecoder: KDBDecoder(m, kdb.Options{})}, func(c *collector) pipeline.Consumer {
			q = pipeline.NewQueue(1, c, nil)
			q.Abort()
			return q
		})
		c := dial(t, e.r.Addr())
		data := kdbRecords(t, m, 1, 0, 10)
		deadline := time.After(5 * time.Second)
		for {
			// An aborted queue may still take a batch while it has room:
			// keep sending until the receiver notices.
			c.Write(data)
			select {
			case err := <-e.done:
				e.done <- err
				if !errors.Is(err, pipeline.ErrClosed) {
					t.Errorf("Run returned %v, want pipeline.ErrClosed", err)
				}
				return
			case <-deadline:
				t.Fatal("Run did not stop when its queue was aborted")
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
}

func TestRunCloseLifecycle(t *testing.T) {
	m := kdbMapping(t)
	cfg := Config{Address: "127.0.0.1:0", NewDecoder: KDBDecoder(m, kdb.Options{})}
	r, err := New(cfg, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	addr := r.Addr().String()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), newCollector()); err == nil {
		t.Error("Run after Close succeeded")
	}
	// The port is free again.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listener not released: %v", err)
	}
	ln.Close()

	// Close stops a running receiver.
	r, err = New(cfg, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), newCollector()) }()
	waitFor(t, "Run to start", 5*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.started
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), newCollector()); err == nil {
		t.Error("second Run succeeded")
	}

	for _, bad := range []Config{
		{Address: "127.0.0.1:0"},
		{NewDecoder: cfg.NewDecoder},
		{Mode: Dual, Address: "127.0.0.1:0"},
		{Mode: Mode(9), Address: "x", NewDecoder: cfg.NewDecoder},
	} {
		if _, err := New(bad, Settings{}); err == nil {
			t.Errorf("New(%+v) succeeded", bad)
		}
	}
	if _, err := New(Config{Address: addr + "x", NewDecoder: cfg.NewDecoder}, Settings{}); err == nil {
		t.Error("listening on a bad address succeeded")
	}
	for _, name := range []string{"tcp-server", "tcp-single-server", "tcp-client", "dual"} {
		mode, err := ParseMode(name)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := ParseMode(mode.String()); back != mode {
			t.Errorf("%s: %s does not parse back", name, mode)
		}
	}
}

// TestMalformedStreamIsReset: a malformed stream is refused with a reset,
// even when the receiver had read all of it, so that the sender cannot
// take the close for the end of a stream read whole.
func TestMalformedStreamIsReset(t *testing.T) {
	m := kdbMapping(t)
	e := start(t, Config{NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
	conn := dial(t, e.r.Addr())
	if _, err := conn.Write(append(kdbRecords(t, m, 1, 0, 5), "\xde\xad\xbe\xef"...)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [64]byte
	_, err := conn.Read(b[:])
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a malformed stream: %v, want a connection reset", err)
	}
	e.col.wait(t, 5, 5*time.Second)
}
