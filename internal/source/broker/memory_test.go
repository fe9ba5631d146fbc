package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TestMemoryLimit: near the process's memory limit Add hands the batch
// held so far on and takes no new message (it stays unacknowledged with
// the broker) until memory is below the limit again; a context that ends
// meanwhile returns without taking it.
func TestMemoryLimit(t *testing.T) {
	var usage atomic.Int64
	lim := memlimit.New(memlimit.Options{Limit: 1000, Usage: func() (int64, bool) { return usage.Load(), true }})
	m, _ := kdb.DefaultMapping(record.Builtin())
	out := &collect{}
	b := NewBatcher(Config{Name: "t", Mapping: m, MaxRecords: 100, MaxDelay: time.Hour}, Settings{Memory: lim}, out)
	var acked atomic.Int64
	msg := func(id string) Message {
		return Message{ID: id, Body: []byte("1;1;2;0;op;C"), Ack: func() error { acked.Add(1); return nil }, Nack: func() error { return nil }}
	}
	ctx := context.Background()
	if err := b.Add(ctx, msg("a")); err != nil {
		t.Fatal(err)
	}
	usage.Store(900)
	lim.Sample(time.Now())

	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.Add(cctx, msg("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Add near the limit, context ending: %v", err)
	}
	if len(out.batches) != 1 || out.batches[0].Len() != 1 || b.Messages != 1 {
		t.Fatalf("%d batches handed on, %d messages taken; want a's batch handed on and x not taken", len(out.batches), b.Messages)
	}
	out.batches[0].Done[0](nil)
	if acked.Load() != 1 {
		t.Fatalf("%d acknowledged, want a", acked.Load())
	}

	added := make(chan error, 1)
	go func() { added <- b.Add(ctx, msg("b")) }()
	select {
	case err := <-added:
		t.Fatalf("Add returned near the limit: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	usage.Store(0)
	lim.Sample(time.Now())
	select {
	case err := <-added:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Add still waits below the limit")
	}
	if b.Messages != 2 || !b.Pending() {
		t.Fatalf("%d messages taken, pending %v; want b taken", b.Messages, b.Pending())
	}
}
