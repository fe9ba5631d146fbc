package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/sink/forward"
)

// TestBlockedBestEffortSink: while a best-effort forward sink is stuck on
// a receiver that accepts but never reads, 1 M records arrive; the Kieker
// log gets every one of them, the forward sink's losses are counted,
// serve's peak RSS stays within the documented 256 MB, and SIGTERM ends
// serve within 10 s.
func TestBlockedBestEffortSink(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 1 M records")
	}
	const n = 1_000_000
	hole := bridgetest.Blackhole(t)
	p := bridgetest.StartConfig(t, `flush_interval: 100ms
metrics: "127.0.0.1:0"
receivers:
  - {name: in, type: kieker-tcp, listen: "127.0.0.1:0"}
sinks:
  - {name: log, type: kieker-log, path: logs}
  - {name: fwd, type: forward, url: "kieker-tcp://`+hole+`", policy: best-effort, write_timeout: 1h}
`)
	sender, err := forward.New(forward.Config{URL: "kieker-tcp://" + p.Addr("in"), Block: true}, forward.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	cat := record.Builtin()
	rec, err := benchkit.NewRecorder(cat, benchkit.Signatures())
	if err != nil {
		t.Fatal(err)
	}
	events := benchkit.Events(1, 0, n)[:n]
	ctx := context.Background()
	var b record.Batch
	for i := range events {
		rec.Add(&b, &events[i], record.NoTimestamp)
		if b.Len() == 1000 || i == n-1 {
			if err := sender.Consume(ctx, &b); err != nil {
				t.Fatal(err)
			}
			b.Reset()
		}
	}
	if err := sender.Close(); err != nil {
		t.Fatal(err)
	}

	metric := func(name, label string) float64 {
		v, _, err := benchkit.Metric(p.Metrics, name, label)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	deadline := time.Now().Add(2 * time.Minute)
	for metric("tracebridge_sink_records_total", `sink="log"`) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the log sink has %v of %d records; stderr:\n%s", metric("tracebridge_sink_records_total", `sink="log"`), n, p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lost := metric("tracebridge_sink_overflow_records_total", `sink="fwd"`); lost < n/2 {
		t.Errorf("the stuck forward sink lost %v records, want most of %d counted", lost, n)
	}
	_, peak, err := benchkit.Memory(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS %.1f MiB", float64(peak)/(1<<20))
	if peak > 256<<20 {
		t.Errorf("peak RSS %.1f MiB, over the documented 256 MB", float64(peak)/(1<<20))
	}

	start := time.Now()
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.Wait(0)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("serve took %v to end after SIGTERM", d)
	}
	if got := len(bridgetest.ReadLog(t, p.LogDir)); got != n+1 { // and the metadata record
		t.Fatalf("log holds %d records, want %d", got, n+1)
	}
}
