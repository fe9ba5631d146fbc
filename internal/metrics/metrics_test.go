package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tracebridge/tracebridge/internal/record"
)

func TestReceiverCountsPerType(t *testing.T) {
	reg := New()
	r := reg.Receiver("in")
	cat := record.Builtin()
	before, after := cat.Lookup(record.BeforeOperationEvent), cat.Lookup(record.AfterOperationEvent)
	var b record.Batch
	for _, typ := range []*record.Type{before, before, after, before, after, after} {
		b.Add(typ, -1)
	}
	r.Records(&b)
	r.Records(&b)
	r.Bytes(100)
	r.DecodeError()
	r.ConnOpened()
	r.ConnOpened()
	r.ConnClosed()
	reg.Sink("log").Consumed(6, time.Millisecond, nil)
	reg.Sink("log").Dropped(2)
	reg.SetQueueDepth(func() int { return 3 })
	want := `
# HELP tracebridge_records_received_total Records decoded, by receiver and record type.
# TYPE tracebridge_records_received_total counter
tracebridge_records_received_total{receiver="in",type="kieker.common.record.flow.trace.operation.AfterOperationEvent"} 6
tracebridge_records_received_total{receiver="in",type="kieker.common.record.flow.trace.operation.BeforeOperationEvent"} 6
# HELP tracebridge_connections Open connections, by receiver.
# TYPE tracebridge_connections gauge
tracebridge_connections{receiver="in"} 1
# HELP tracebridge_queue_depth_batches Batches waiting between receivers and sinks.
# TYPE tracebridge_queue_depth_batches gauge
tracebridge_queue_depth_batches 3
# HELP tracebridge_sink_dropped_records_total Records a sink dropped (e.g. a forward target unreachable), by sink.
# TYPE tracebridge_sink_dropped_records_total counter
tracebridge_sink_dropped_records_total{sink="log"} 2
`
	if err := testutil.GatherAndCompare(reg.Gatherer(), strings.NewReader(want),
		"tracebridge_records_received_total", "tracebridge_connections", "tracebridge_queue_depth_batches", "tracebridge_sink_dropped_records_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNilHandles(t *testing.T) {
	var reg *Registry
	r, s := reg.Receiver("x"), reg.Sink("y")
	r.Records(&record.Batch{})
	r.Bytes(1)
	r.DecodeError()
	r.ConnOpened()
	r.ConnClosed()
	r.ConnRejected()
	s.Consumed(1, 0, nil)
	s.Dropped(1)
	reg.SetQueueDepth(func() int { return 0 })
}
