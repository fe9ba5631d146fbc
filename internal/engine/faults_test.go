package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// downSink is a durable sink whose target is down, as a durable forward
// sink's: Consume waits until Abort, then fails.
type downSink struct {
	abort chan struct{}
	once  sync.Once
}

func (s *downSink) Consume(_ context.Context, b *record.Batch) error {
	<-s.abort
	return fmt.Errorf("%d records not sent: %w", b.Len(), errAway)
}
func (s *downSink) Flush() error { return nil }
func (s *downSink) Close() error { return nil }
func (s *downSink) Abort()       { s.once.Do(func() { close(s.abort) }) }

// TestShutdownSaysWhatItWaitsFor: shutdown waits for a durable sink that
// cannot deliver. It says so once, early, with the sink's name, its
// records, how long it may wait and the hint it was given (it waited 30 s
// without a word); Undelivered counts what stopping at once would lose
// (serve reports it on a second Ctrl-C); when the timeout aborts the sink,
// one line counts the records lost (only the first batch's failure was
// logged), and the sink that delivered is in neither.
func TestShutdownSaysWhatItWaitsFor(t *testing.T) {
	var logs logtest.Buffer
	const hint = "a second Ctrl-C stops now"
	br := New(Settings{Logger: logs.Logger(), ShutdownTimeout: 4 * time.Second, ShutdownHint: hint})
	delivered := &memSink{}
	down := &downSink{abort: make(chan struct{})}
	br.AddSink("log", delivered)
	br.AddSink("forward", down)
	br.AddSource("gen", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		if err := emit(ctx, out, 0, 404, 100); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- br.Run(ctx) }()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s; log:\n%s", what, logs.String())
			}
		}
	}
	waitUntil("the log sink has every record", func() bool { return delivered.count() == 404 })
	cancel()
	const waiting, lost = "shutdown: waiting for a sink to deliver its records", "shutdown: records not delivered; they are lost"
	waitUntil("the wait is said", func() bool { return strings.Contains(logs.String(), waiting) })
	if d := cmp.Diff([]SinkRecords{{"forward", 404}}, br.Undelivered()); d != "" {
		t.Errorf("Undelivered while shutdown waits (-want +got):\n%s", d)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after the shutdown timeout")
	}
	type line struct {
		Msg, Sink, Hint, UpTo string
		Records               int64
	}
	got := map[string][]line{}
	for _, l := range logs.Lines(t) {
		msg, _ := l["msg"].(string)
		sink, _ := l["sink"].(string)
		hint, _ := l["hint"].(string)
		upTo, _ := l["up_to"].(string)
		records, _ := l["records"].(float64)
		got[msg] = append(got[msg], line{Msg: msg, Sink: sink, Hint: hint, UpTo: upTo, Records: int64(records)})
	}
	if w := got[waiting]; len(w) != 1 || w[0].Sink != "forward" || w[0].Records != 404 || w[0].Hint != hint || w[0].UpTo == "" {
		t.Errorf("the wait said as %+v, want once for sink forward with 404 records, up_to and the hint; log:\n%s", w, logs.String())
	}
	if l := got[lost]; len(l) != 1 || l[0].Sink != "forward" || l[0].Records != 404 {
		t.Errorf("the loss said as %+v, want once for sink forward with 404 records; log:\n%s", l, logs.String())
	}
	if n := len(got["sink failed"]); n != 0 {
		t.Errorf("%d lines of sink failures besides the count; log:\n%s", n, logs.String())
	}
}
