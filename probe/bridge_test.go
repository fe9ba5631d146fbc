package probe

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// fakeBridge is a Kieker single-socket TCP reader on loopback: it decodes
// every connection with the kieker codec (a new registry per connection,
// as the bridge does) and keeps the records, or with discard set only
// counts bytes.
type fakeBridge struct {
	t       testing.TB
	ln      net.Listener
	discard bool

	mu      sync.Mutex
	records []record.Record
	errs    []error
	conns   []net.Conn
	bytes   int64
	nconn   int
	wg      sync.WaitGroup
}

func newFakeBridge(t testing.TB, discard bool) *fakeBridge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBridge{t: t, ln: ln, discard: discard}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBridge) addr() string { return b.ln.Addr().String() }

func (b *fakeBridge) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.nconn++
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

func (b *fakeBridge) serve(c net.Conn) {
	defer b.wg.Done()
	defer c.Close()
	dec := kieker.NewDecoder(kieker.Options{Inline: true, Catalog: trace.Types()})
	var batch record.Batch
	buf := make([]byte, 64<<10)
	var pend []byte
	for {
		n, err := c.Read(buf)
		b.mu.Lock()
		b.bytes += int64(n)
		b.mu.Unlock()
		if !b.discard && n > 0 {
			pend = append(pend, buf[:n]...)
			batch.Reset()
			used, derr := dec.Decode(pend, &batch)
			pend = pend[:copy(pend, pend[used:])]
			b.mu.Lock()
			for i := range batch.Records {
				b.records = append(b.records, batch.Records[i].Clone())
			}
			if derr != nil {
				b.errs = append(b.errs, derr)
			}
			b.mu.Unlock()
			if derr != nil {
				return
			}
		}
		if err != nil {
			if len(pend) > 0 && !errors.Is(err, net.ErrClosed) {
				b.mu.Lock()
				b.errs = append(b.errs, io.ErrUnexpectedEOF)
				b.mu.Unlock()
			}
			return
		}
	}
}

// dropConns closes every connection accepted so far.
func (b *fakeBridge) dropConns() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
}

func (b *fakeBridge) close() {
	b.ln.Close()
	b.dropConns()
	b.wg.Wait()
}

func (b *fakeBridge) snapshot() ([]record.Record, []error, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]record.Record(nil), b.records...), append([]error(nil), b.errs...), b.nconn
}

// waitRecords waits until the bridge holds n records.
func (b *fakeBridge) waitRecords(n int) []record.Record {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, errs, _ := b.snapshot()
		if len(errs) > 0 {
			b.t.Fatalf("decoding what the writer sent: %v", errs)
		}
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("bridge has %d records, want %d", len(recs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// unusedAddr returns a loopback address nobody listens on.
func unusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
