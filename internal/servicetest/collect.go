package servicetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridge"
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

// RunBridge runs a bridge with one source and the collector, flushing every
// 50 ms. stop cancels it and returns Run's error.
func RunBridge(tb testing.TB, src bridge.Source, sink *Collector) (stop func() error) {
	tb.Helper()
	br := bridge.New(bridge.Settings{FlushInterval: 50 * time.Millisecond})
	br.AddSource("test", src)
	br.AddSink("collector", sink)
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
