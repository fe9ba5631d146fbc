package benchkit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

const exposition = `# HELP tracebridge_sink_records_total Records a sink consumed, by sink.
# TYPE tracebridge_sink_records_total counter
tracebridge_sink_records_total{sink="other"} 5
tracebridge_sink_records_total{sink="log"} 1.2345678e+07
tracebridge_sink_records_total_extra{sink="log"} 3
tracebridge_records_received_total{receiver="in",type="x"} 42
tracebridge_up 1 1700000000000
`

func TestCounter(t *testing.T) {
	tests := []struct {
		name, metric, label string
		want                float64
		ok                  bool
	}{
		{"labelled", "tracebridge_sink_records_total", `sink="log"`, 12345678, true},
		{"other label", "tracebridge_sink_records_total", `sink="other"`, 5, true},
		{"absent label", "tracebridge_sink_records_total", `sink="none"`, 0, false},
		{"longer name skipped", "tracebridge_sink_records_total_extra", `sink="log"`, 3, true},
		{"unlabelled with timestamp", "tracebridge_up", "", 1, true},
		{"absent", "tracebridge_nothing", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := counter([]byte(exposition), tt.metric, tt.label)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("counter = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzCounter(f *testing.F) {
	f.Add([]byte(exposition), `sink="log"`)
	f.Add([]byte("tracebridge_sink_records_total{sink=\"log\"\n"), `sink="log"`)
	f.Add([]byte("tracebridge_sink_records_total{}"), "")
	f.Add([]byte("tracebridge_sink_records_total NaN"), "")
	f.Fuzz(func(t *testing.T, body []byte, label string) {
		counter(body, "tracebridge_sink_records_total", label) // must not panic
	})
}

func TestParseLine(t *testing.T) {
	type seen struct {
		addr, logDir, metrics string
		ready                 bool
	}
	tests := []struct {
		lines []string
		want  seen
	}{
		{[]string{
			"tracebridge: receiver in (tcp-server) listening on 127.0.0.1:4000",
			"tracebridge: sink log (kieker-log) writing to /tmp/x/kieker-1",
			"tracebridge: metrics on http://127.0.0.1:5000/metrics",
			"tracebridge: ready",
		}, seen{"127.0.0.1:4000", "/tmp/x/kieker-1", "http://127.0.0.1:5000/metrics", true}},
		{[]string{"tracebridge: receiver in (kieker-tcp) listening on 127.0.0.1:10133"}, seen{addr: "127.0.0.1:10133"}},
		{[]string{"tracebridge: receiver in (broker-embedded) listening on nats://127.0.0.1:4222 and mqtt://127.0.0.1:1883"},
			seen{addr: "127.0.0.1:4222"}},
		{[]string{"tracebridge: receiver in (stomp-client) consuming from stomp://127.0.0.1:61613/queue/q"},
			seen{addr: "stomp://127.0.0.1:61613/queue/q"}},
		{[]string{
			"tracebridge: receiver other (tcp-server) listening on 127.0.0.1:1",
			"receiver in (x) listening on y",
			"tracebridge: sink other (kieker-log) writing to /elsewhere",
			"tracebridge: ready?",
		}, seen{}},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var b Bridge
			for _, l := range tt.lines {
				b.parseLine(l)
			}
			if got := (seen{b.Addr, b.LogDir, b.Metrics, b.ready}); got != tt.want {
				t.Fatalf("addr, logDir, metrics, ready = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPollStep(t *testing.T) {
	tests := []struct{ elapsed, want time.Duration }{
		{0, 2 * time.Millisecond},
		{300 * time.Millisecond, 2 * time.Millisecond},
		{time.Second, 5 * time.Millisecond},
		{4 * time.Second, 20 * time.Millisecond},
		{time.Hour, 20 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := PollStep(tt.elapsed); got != tt.want {
			t.Errorf("PollStep(%v) = %v, want %v", tt.elapsed, got, tt.want)
		}
	}
}

func TestTail(t *testing.T) {
	tl := NewTail(8)
	if got := tl.String(); got != "(no output on stderr)" {
		t.Fatalf("empty tail: %q", got)
	}
	for _, w := range []string{"abc", "defgh", "ijk\n"} {
		if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if got, want := tl.String(), "stderr:\nefghijk"; got != want {
		t.Fatalf("tail %q, want %q", got, want)
	}
	if !tl.Contains("ghij") || tl.Contains("abc") {
		t.Fatal("Contains does not look at the last 8 bytes alone")
	}
}

// TestStartStop builds tracebridge and runs it: skipped with -short.
func TestStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tracebridge serve")
	}
	ctx := context.Background()
	bin, err := Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if v := GoVersion(bin); !strings.HasPrefix(v, "go") {
		t.Errorf("GoVersion = %q", v)
	}
	t.Run("runs", func(t *testing.T) {
		b, err := Start(ctx, bin, t.TempDir(), "    type: tcp-server\n    listen: \"127.0.0.1:0\"\n")
		if err != nil {
			t.Fatal(err)
		}
		defer b.Kill()
		if b.Addr == "" || b.LogDir == "" || !strings.HasSuffix(b.Metrics, "/metrics") {
			t.Fatalf("addresses %q %q %q", b.Addr, b.LogDir, b.Metrics)
		}
		if n, err := b.SinkRecords(); n != 0 || err != nil {
			t.Fatalf("SinkRecords = %d, %v", n, err)
		}
		if rss, peak, err := Memory(b.Pid()); err != nil || rss <= 0 || peak < rss {
			t.Errorf("Memory = %d, %d, %v", rss, peak, err)
		}
		cpu, err := b.Stop()
		if err != nil || cpu <= 0 {
			t.Fatalf("Stop = %v, %v", cpu, err)
		}
		b.Kill() // after Stop: does nothing
	})
	t.Run("bad configuration", func(t *testing.T) {
		_, err := Start(ctx, bin, t.TempDir(), "    type: no-such-receiver\n")
		if err == nil || !strings.Contains(err.Error(), "exited at start") {
			t.Fatalf("err = %v, want one saying serve exited at start", err)
		}
	})
}
