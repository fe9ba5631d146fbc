package tcp

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/metrics"
)

// TestMemoryBackPressure: near the process's memory limit a connection
// is not read (the sender's writes block once the socket buffers are
// full, and nothing is handed on), the wait is counted; once memory is
// below the limit again, everything sent arrives. A receiver that drains
// while refusing ends.
func TestMemoryBackPressure(t *testing.T) {
	var usage atomic.Int64
	lim := memlimit.New(memlimit.Options{Limit: 1000, Usage: func() (int64, bool) { return usage.Load(), true }})
	usage.Store(900)
	lim.Sample(time.Now())

	m := kdbMapping(t)
	col := newCollector()
	reg := metrics.New()
	r, err := New(Config{Name: "kdb", Address: "127.0.0.1:0", NewDecoder: KDBDecoder(m, kdb.Options{})},
		Settings{Metrics: reg.Receiver("kdb"), Memory: lim})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{r: r, col: col, reg: reg, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- r.Run(ctx, col) }()
	t.Cleanup(func() { e.stop(t) })

	c := dial(t, r.Addr())
	if _, err := c.Write(kdbRecords(t, m, 1, 0, 100)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the connection to wait for memory", 10*time.Second, func() bool {
		return e.counter(t, "tracebridge_memory_refusals_total") >= 1
	})
	// Back-pressure: the receiver reads nothing, so a large write cannot
	// complete.
	big := kdbRecords(t, m, 2, 0, 200_000)
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a %d-byte write to a receiver near the memory limit: %d bytes, %v; want it blocked", len(big), n, err)
	}
	if got := col.len(); got != 0 {
		t.Fatalf("%d records handed on while refusing", got)
	}

	usage.Store(100)
	lim.Sample(time.Now())
	c.SetWriteDeadline(time.Time{})
	if _, err := c.Write(big[n:]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	col.wait(t, 100+200_000, 30*time.Second)

	// Refusing again, a draining receiver does not wait for memory.
	usage.Store(900)
	lim.Sample(time.Now())
	c2 := dial(t, r.Addr())
	if _, err := c2.Write(kdbRecords(t, m, 3, 0, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second connection to wait", 10*time.Second, func() bool {
		return e.counter(t, "tracebridge_memory_refusals_total") >= 2
	})
	if err := e.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
