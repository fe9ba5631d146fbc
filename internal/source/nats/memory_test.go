package nats

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// TestJetStreamMemoryLimit: on the machine's NATS server, a receiver
// near the process's memory limit takes no message (nothing is handed
// on, the messages stay unacknowledged in the stream); once memory is
// below the limit again every message arrives.
func TestJetStreamMemoryLimit(t *testing.T) {
	servicetest.Require(t, servicetest.NATS, "NATS")
	var usage atomic.Int64
	lim := memlimit.New(memlimit.Options{Limit: 1000, Usage: func() (int64, bool) { return usage.Load(), true }})
	usage.Store(900)
	lim.Sample(time.Now())

	subject, stream := names(t)
	url := "nats://" + servicetest.NATS
	r, err := New(Config{Name: "nats", URL: url, Subject: subject, Stream: stream, Batch: broker.Config{Mapping: mapping(t)}},
		broker.Settings{Memory: lim})
	if err != nil {
		t.Fatal(err)
	}
	sink := &servicetest.Collector{}
	servicetest.RunBridge(t, r, sink)
	defer deleteStream(t, url, stream)
	waitStream(t, url, stream)
	publishJS(t, url, subject, 0, 500)
	deadline := time.Now().Add(30 * time.Second)
	for lim.Stats().Refusals == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the receiver never asked the memory limit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := sink.Len(); n != 0 {
		t.Fatalf("%d records handed on near the memory limit", n)
	}
	usage.Store(0)
	lim.Sample(time.Now())
	sink.WaitDistinct(t, servicetest.ByOrderIndex, 500, 30*time.Second)
}
