package servicetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Collector is a sink that keeps copies of the records it consumes.
type Collector struct {
	mu      sync.Mutex
	records []record.Record
	// FailFlush makes Flush fail, so nothing it consumed becomes durable
	// (brokers then redeliver).
	FailFlush bool
}

var _ pipeline.Sink = (*Collector)(nil)

// Consume keeps copies of b's records.
func (c *Collector) Consume(_ context.Context, b *record.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range b.Records {
		c.records = append(c.records, b.Records[i].Clone())
	}
	return nil
}

// Flush succeeds unless FailFlush.
func (c *Collector) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.FailFlush {
		return errFlush
	}
	return nil
}

// Close flushes.
func (c *Collector) Close() error { return c.Flush() }

// Records returns a copy of what was consumed.
func (c *Collector) Records() []record.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]record.Record(nil), c.records...)
}

// Len returns the number of records consumed.
func (c *Collector) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.records)
}

// WaitFor waits until the collector holds at least n records.
func (c *Collector) WaitFor(tb testing.TB, n int, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for c.Len() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("collected %d records within %v, want %d", c.Len(), timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type flushError struct{}

func (flushError) Error() string { return "flush refused (test)" }

var errFlush = flushError{}

// RunBridge runs a bridge with one source and one sink (a Collector, a
// RefusingSink), flushing every 50 ms. stop cancels it and returns Run's error.
func RunBridge(tb testing.TB, src pipeline.Source, sink pipeline.Sink) (stop func() error) {
	tb.Helper()
	br := engine.New(engine.Settings{FlushInterval: 50 * time.Millisecond})
	br.AddSource("test", src)
	br.AddSink("sink", sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				tb.Error("bridge did not stop")
			}
		})
		return err
	}
	tb.Cleanup(func() { stop() })
	return stop
}

// RefusingSink refuses batches while Fail is set and keeps the orderIndex
// (field 2) of the records it accepted. Its Flush always succeeds, so what
// it accepted is durable: brokers must redeliver what it refused.
type RefusingSink struct {
	Fail    atomic.Bool
	Refused atomic.Int64 // batches refused

	mu   sync.Mutex
	seen map[int64]bool
}

var _ pipeline.Sink = (*RefusingSink)(nil)

// Consume refuses b while Fail is set, else notes its orderIndexes.
func (s *RefusingSink) Consume(_ context.Context, b *record.Batch) error {
	if s.Fail.Load() {
		s.Refused.Add(1)
		return errors.New("sink refused (test)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[int64]bool{}
	}
	for i := range b.Records {
		s.seen[ByOrderIndex(&b.Records[i])] = true
	}
	return nil
}

// Flush succeeds.
func (s *RefusingSink) Flush() error { return nil }

// Close succeeds.
func (s *RefusingSink) Close() error { return nil }

// Missing returns the orderIndexes in [from, to) not accepted yet.
func (s *RefusingSink) Missing(from, to int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m []int
	for i := from; i < to; i++ {
		if !s.seen[int64(i)] {
			m = append(m, i)
		}
	}
	return m
}

// ByOrderIndex keys a trace event by its orderIndex (field 2), for
// Distinct and WaitDistinct.
func ByOrderIndex(r *record.Record) int64 { return r.Values[2].Int() }

// Distinct counts the distinct keys of the records consumed: brokers
// deliver at least once, so a record may come twice.
func (c *Collector) Distinct(key func(*record.Record) int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[int64]bool{}
	for i := range c.records {
		seen[key(&c.records[i])] = true
	}
	return len(seen)
}

// WaitDistinct waits until n distinct keys were consumed.
func (c *Collector) WaitDistinct(tb testing.TB, key func(*record.Record) int64, n int, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for c.Distinct(key) < n {
		if time.Now().After(deadline) {
			tb.Fatalf("%d distinct records within %v, want %d", c.Distinct(key), timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
