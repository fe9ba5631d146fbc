package nats

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// TestHandOffFailureRefusesAtOnce: when the bridge's queue no longer takes
// batches, the receiver returns at once (instead of waiting
// broker.SettleWait for acknowledgements that never come), and the
// messages it held are refused (NAK), so the next receiver gets them
// without waiting for the server's AckWait.
func TestHandOffFailureRefusesAtOnce(t *testing.T) {
	servicetest.Require(t, servicetest.NATS, "NATS")
	subject, stream := names(t)
	url := "nats://" + servicetest.NATS
	cfg := Config{Name: "nats", URL: url, Subject: subject, Stream: stream, AckWait: time.Minute, Batch: broker.Config{Mapping: mapping(t)}}
	r, err := New(cfg, broker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer deleteStream(t, url, stream)
	publishJS(t, url, subject, 0, 10)

	q := pipeline.NewQueue(1, pipeline.ConsumerFunc(func(context.Context, *record.Batch) error { return nil }), nil)
	q.Close()
	t0 := time.Now()
	err = r.Run(context.Background(), q)
	if !errors.Is(err, pipeline.ErrClosed) {
		t.Fatalf("Run: %v, want %v", err, pipeline.ErrClosed)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("Run took %v to return after the queue refused a batch", d)
	}

	r2, _ := New(cfg, broker.Settings{})
	sink := &servicetest.Collector{}
	servicetest.RunBridge(t, r2, sink)
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 10, 10*time.Second)
}
