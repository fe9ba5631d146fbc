package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// faultySink fails its first failConsume Consumes and its first
// failFlush Flushes, as a sink whose server is away for a while.
type faultySink struct {
	failConsume, failFlush int64
	consumes, flushes      atomic.Int64
}

var errAway = errors.New("server away")

func (s *faultySink) Consume(context.Context, *record.Batch) error {
	if s.consumes.Add(1) <= s.failConsume {
		return errAway
	}
	return nil
}

func (s *faultySink) Flush() error {
	if s.flushes.Add(1) <= s.failFlush {
		return errAway
	}
	return nil
}

func (s *faultySink) Close() error { return nil }

// TestSinkFaultsLoggedOncePerOutage: a sink failing many Consumes and
// Flushes in a row is logged once when its failures start and once when
// they end (after faultSettle of successes), with their number; the
// metric counts each failed batch.
func TestSinkFaultsLoggedOncePerOutage(t *testing.T) {
	const failConsume, failFlush = 7, 5
	var logs logtest.Buffer
	reg := metrics.New()
	br := New(Settings{Logger: logs.Logger(), Metrics: reg, FlushInterval: 2 * time.Millisecond})
	sink := &faultySink{failConsume: failConsume, failFlush: failFlush}
	br.AddSink("away", sink)
	br.AddSource("gen", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		// Batches until both ends are logged.
		var b record.Batch
		deadline := time.Now().Add(60 * time.Second)
		for i := 0; strings.Count(logs.String(), "sink works again") < 2 && time.Now().Before(deadline); i++ {
			b.Reset()
			b.Add(typ, -1).Values[2] = record.IntValue(int64(i))
			if err := out.Consume(ctx, &b); err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	}))
	if err := br.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	type line struct {
		Level, Msg, Sink, Op, Err string
		Failures                  int64
	}
	var got []line
	for _, s := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("log line %q: %v", s, err)
		}
		if l.Sink == "away" {
			got = append(got, l)
		}
	}
	// Consume and Flush run on two goroutines: their lines may interleave.
	byOp := map[string][]line{}
	for _, l := range got {
		byOp[l.Op] = append(byOp[l.Op], l)
	}
	want := map[string][]line{
		"consume": {
			{Level: "ERROR", Msg: "sink failed", Sink: "away", Op: "consume", Err: "sink away: server away"},
			{Level: "INFO", Msg: "sink works again", Sink: "away", Op: "consume", Failures: failConsume},
		},
		"flush": {
			{Level: "ERROR", Msg: "sink failed", Sink: "away", Op: "flush", Err: "sink away: flush: server away"},
			{Level: "INFO", Msg: "sink works again", Sink: "away", Op: "flush", Failures: failFlush},
		},
	}
	if d := cmp.Diff(want, byOp); d != "" {
		t.Errorf("the sink's log lines (-want +got):\n%s\nall lines:\n%s", d, logs.String())
	}
	want2 := `# HELP tracebridge_sink_errors_total Batches a sink failed to consume, by sink.
# TYPE tracebridge_sink_errors_total counter
tracebridge_sink_errors_total{sink="away"} 7
`
	if err := testutil.GatherAndCompare(reg.Gatherer(), strings.NewReader(want2), "tracebridge_sink_errors_total"); err != nil {
		t.Errorf("each failed batch counted: %v", err)
	}
}
