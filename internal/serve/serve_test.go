package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/memlimit"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/trace"
)

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start builds cfg (its data directory a temporary one unless set) and
// runs the bridge; stop ends the run and returns Run's error.
func start(t *testing.T, cfg *config.Config, set Settings) (s *Server, stop func() error) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	s, err := Build(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, func() error {
		cancel()
		return <-done
	}
}

func TestBuildDefaultLikeConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := parse(t, `
metrics: 127.0.0.1:0
receivers:
  - {type: kieker-tcp, listen: "127.0.0.1:0", timestamp_unit: us}
  - {type: tcp-server, listen: "127.0.0.1:0"}
  - {type: kieker-tcp-dual, listen: "127.0.0.1:0", registry_listen: "127.0.0.1:0"}
sinks:
  - {type: kieker-log}
  - {type: forward, url: "kieker-tcp://127.0.0.1:1", policy: best-effort}
`)
	cfg.DataDir = dir
	s, err := Build(cfg, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Receivers) != 3 || !strings.Contains(s.Receivers[2].Where, "registry") || s.MetricsAddr == "" {
		t.Fatalf("%+v %q", s.Receivers, s.MetricsAddr)
	}
	if where := strings.TrimPrefix(s.Sinks[0].Where, "writing to "); filepath.Dir(where) != dir {
		t.Fatalf("log %s not under %s", where, dir)
	}
	if s.Sinks[0].Policy != "durable" || s.Sinks[1].Policy != "best-effort" {
		t.Fatalf("policies %+v", s.Sinks)
	}
}

// TestMemoryLimit: memory_limit makes the limiter the receivers ask
// (published in Shared), its figures are in the metrics, Run sets Go's
// soft limit from it while it runs and puts the old one back; without
// the key the limit comes from the machine.
func TestMemoryLimit(t *testing.T) {
	build := func(yaml string) *Server {
		cfg := parse(t, yaml)
		cfg.DataDir = t.TempDir()
		s, err := Build(cfg, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := build("memory_limit: 300MiB\nreceivers: [{type: tcp-server, listen: \"127.0.0.1:0\"}]\nsinks: [{type: kieker-log}]\n")
	if s.Memory.Limit() != 300<<20 || s.MemoryFrom != "memory_limit" || s.Shared.Memory() != pipeline.Memory(s.Memory) {
		t.Fatalf("limit %d from %q, shared %v", s.Memory.Limit(), s.MemoryFrom, s.Shared.Memory())
	}
	if g := s.Memory.GoLimit(); g <= 0 || g > 300<<20*85/100 {
		t.Errorf("Go's limit %d for 300 MiB", g)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: serve keeps it")
	}
	before := debug.SetMemoryLimit(-1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for debug.SetMemoryLimit(-1) != s.GoMemoryLimit() {
		if time.Now().After(deadline) {
			t.Fatalf("Go's soft limit %d while running, want %d", debug.SetMemoryLimit(-1), s.GoMemoryLimit())
		}
		time.Sleep(5 * time.Millisecond)
	}
	mfs, err := s.Metrics.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "tracebridge_memory_limit_bytes" && mf.GetMetric()[0].GetGauge().GetValue() == 300<<20 {
			found = true
		}
	}
	if !found {
		t.Error("no tracebridge_memory_limit_bytes of 300 MiB")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("Go's soft limit %d after Run, want %d back", got, before)
	}

	d := build("receivers: [{type: tcp-server, listen: \"127.0.0.1:0\"}]\nsinks: [{type: kieker-log}]\n")
	defer d.Close()
	if want, from := memlimit.Default(); d.Memory.Limit() != want || d.MemoryFrom != from {
		t.Errorf("default %d (%s), want %d (%s)", d.Memory.Limit(), d.MemoryFrom, want, from)
	}
	if y, err := d.Config(); err != nil || !strings.Contains(string(y), fmt.Sprintf("memory_limit: %d\n", d.Memory.Limit())) {
		t.Errorf("effective configuration without the derived memory_limit (%v):\n%s", err, y)
	}
}

// TestMemoryTarget: without memory_limit and memory_target the target is
// Settings.MemoryTarget (the command's memlimit.DefaultTarget; none for
// a program embedding the bridge) and Run sets Go's soft limit from it
// (not from the derived limit); memory_target sets it, beside
// memory_limit too; with memory_limit alone there is none; the effective
// configuration says it.
func TestMemoryTarget(t *testing.T) {
	build := func(yaml string, def int64) *Server {
		cfg := parse(t, yaml+"receivers: [{type: tcp-server, listen: \"127.0.0.1:0\"}]\nsinks: [{type: kieker-log}]\n")
		cfg.DataDir = t.TempDir()
		s, err := Build(cfg, Settings{MemoryTarget: def})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		yaml        string
		def, target int64
	}{
		{"", memlimit.DefaultTarget, memlimit.DefaultTarget},
		{"", 0, 0},
		{"memory_target: 200MiB\n", memlimit.DefaultTarget, 200 << 20},
		{"memory_target: 200MiB\n", 0, 200 << 20},
		{"memory_limit: 1GiB\nmemory_target: 300MiB\n", memlimit.DefaultTarget, 300 << 20},
		{"memory_limit: 1GiB\n", memlimit.DefaultTarget, 0},
	} {
		s := build(tc.yaml, tc.def)
		if s.Memory.Target() != tc.target {
			t.Errorf("%q: target %d, want %d", tc.yaml, s.Memory.Target(), tc.target)
		}
		want := s.Memory.GoLimit()
		if tc.target > 0 {
			want = s.Memory.GoTarget()
			if want >= s.Memory.GoLimit() || want > tc.target*85/100 {
				t.Errorf("%q: Go's target %d for %d (limit's %d)", tc.yaml, want, tc.target, s.Memory.GoLimit())
			}
		}
		if os.Getenv("GOMEMLIMIT") == "" && s.GoMemoryLimit() != want {
			t.Errorf("%q: Go's soft limit %d, want %d", tc.yaml, s.GoMemoryLimit(), want)
		}
		y, err := s.Config()
		if line := fmt.Sprintf("memory_target: %d\n", tc.target); err != nil || strings.Contains(string(y), line) != (tc.target > 0) {
			t.Errorf("%q: effective configuration (%v) with %q: %v\n%s", tc.yaml, err, line, tc.target > 0, y)
		}
		s.Close()
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: serve keeps it")
	}
	s := build("", memlimit.DefaultTarget)
	before := debug.SetMemoryLimit(-1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for debug.SetMemoryLimit(-1) != s.Memory.GoTarget() {
		if time.Now().After(deadline) {
			t.Fatalf("Go's soft limit %d while running, want the default target's %d", debug.SetMemoryLimit(-1), s.Memory.GoTarget())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("Go's soft limit %d after Run, want %d back", got, before)
	}
}

func TestBuildErrorClasses(t *testing.T) {
	dir := t.TempDir()
	badMap := filepath.Join(dir, "m.txt")
	os.WriteFile(badMap, []byte("1=does.not.Exist\n"), 0o644)
	busy, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy.Close()
	for _, tc := range []struct {
		yaml  string
		class error
		want  string
	}{
		{"receivers: [{type: tcp-server, listen: '127.0.0.1:0', mapping: " + badMap + "}]\nsinks: [{type: kieker-log, path: " + dir + "}]", ErrMapping, "does.not.Exist"},
		{"receivers: [{type: tcp-server, listen: '" + busy.Addr().String() + "'}]\nsinks: [{type: kieker-log, path: " + dir + "}]", ErrComm, "address already in use"},
		{"receivers: [{type: x}]\nsinks: [{type: kieker-log}]", ErrConfig, `unknown type "x"`},
		{"receivers: [{type: tcp-server, listen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log, path: " + dir + ", compression: bzip2}]", ErrConfig, "bzip2"},
		{"libraries: [" + badMap + "]\nreceivers: [{type: tcp-server, listen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log, path: " + dir + "}]", ErrConfig, "record types"},
		{"receivers: [{type: tcp-server, lisen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log}]", ErrConfig, `receiver tcp-server (tcp-server): line 1: unknown key "lisen"`},
		{"receivers: [{type: tcp-client}]\nsinks: [{type: kieker-log}]", ErrConfig, "connect address missing"},
		{"receivers: [{type: tcp-server, listen: x, timestamp_unit: days}]\nsinks: [{type: kieker-log}]", ErrConfig, "timestamp_unit"},
		{"receivers: [{type: tcp-server, listen: x}]\nsinks: [{type: forward}]", ErrConfig, "url missing"},
		{"metrics: '0.0.0.0:0'\nreceivers: [{type: tcp-server, listen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log, path: " + dir + "}]", ErrConfig, "metrics 0.0.0.0:0: 0.0.0.0 is not a loopback address"},
		{"receivers: [{type: tcp-server, listen: x}]\nstages: [{type: split}]\nsinks: [{type: kieker-log}]", ErrConfig, "boundaries missing"},
	} {
		cfg := parse(t, tc.yaml)
		_, err := Build(cfg, Settings{})
		if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\nerror %v, want class %v and %q", tc.yaml, err, tc.class, tc.want)
		}
	}
}

// toyConfig, toyReceiver and toySink prove the component contract: a
// receiver and a sink added through the factory list alone.
type toyConfig struct {
	Count  int    `yaml:"count"`
	Prefix string `yaml:"prefix"`
}

func (c *toyConfig) Validate() error {
	if c.Count <= 0 {
		return errors.New("count must be positive")
	}
	return nil
}

type toyReceiver struct {
	n   int
	set pipeline.Settings
}

func (r *toyReceiver) Where() string { return "generating " + r.set.Name }
func (r *toyReceiver) Close() error  { return nil }
func (r *toyReceiver) Run(ctx context.Context, out pipeline.Consumer) error {
	typ := r.set.Catalog.Lookup(record.TraceMetadata)
	var b record.Batch
	for i := range r.n {
		b.Add(typ, int64(i)).Values[0] = record.IntValue(int64(i))
	}
	b.Origin.Host = "toy-host"
	return out.Consume(ctx, &b)
}

type toySink struct {
	mu      sync.Mutex
	prefix  string
	records int
	origins []record.Origin
	closed  bool
}

func (s *toySink) Where() string { return "memory" }
func (s *toySink) Flush() error  { return nil }
func (s *toySink) Close() error  { s.mu.Lock(); s.closed = true; s.mu.Unlock(); return nil }
func (s *toySink) Consume(_ context.Context, b *record.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records += b.Len()
	s.origins = append(s.origins, b.Origin)
	return nil
}

func TestToyComponentsThroughFactories(t *testing.T) {
	sink := &toySink{}
	f := DefaultFactories()
	f.Receivers = append(f.Receivers, pipeline.NewReceiverFactory("toy", func() *toyConfig { return &toyConfig{Count: 1} },
		func(c *toyConfig, set pipeline.Settings) (pipeline.Receiver, error) {
			return &toyReceiver{n: c.Count, set: set}, nil
		}))
	f.Sinks = append(f.Sinks, pipeline.NewSinkFactory("toy-sink", pipeline.BestEffort, func() *toyConfig { return &toyConfig{Count: 1} },
		func(c *toyConfig, set pipeline.Settings) (pipeline.BuiltSink, error) {
			sink.prefix = c.Prefix
			return sink, nil
		}))

	cfg := parse(t, "receivers: [{type: toy, name: gen, count: 7}]\nsinks: [{type: toy-sink, prefix: p}]\n")
	cfg.DataDir = t.TempDir()
	s, err := Build(cfg, Settings{Factories: f})
	if err != nil {
		t.Fatal(err)
	}
	if s.Receivers[0].Where != "generating gen" || s.Sinks[0].Policy != "best-effort" {
		t.Fatalf("%+v %+v", s.Receivers, s.Sinks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.records != 7 || sink.prefix != "p" || !sink.closed {
		t.Fatalf("sink saw %d records, prefix %q, closed %v", sink.records, sink.prefix, sink.closed)
	}
	if o := sink.origins[0]; o.Receiver != "gen" || o.Host != "toy-host" {
		t.Fatalf("origin %+v", o)
	}

	// The toy's own configuration is checked like any other.
	_, err = Build(parse(t, "receivers: [{type: toy, count: 0}]\nsinks: [{type: toy-sink}]\n"), Settings{Factories: f})
	if err == nil || !strings.Contains(err.Error(), "receiver toy (toy): count must be positive") {
		t.Fatalf("invalid toy: %v", err)
	}
	_, err = Build(parse(t, "receivers: [{type: toy, cont: 3}]\nsinks: [{type: toy-sink}]\n"), Settings{Factories: f})
	if err == nil || !strings.Contains(err.Error(), `unknown key "cont"`) {
		t.Fatalf("typo in toy: %v", err)
	}
}

// spanSource hands on span records of one trace across three services,
// children before their parents.
type spanSource struct{}

func (spanSource) Where() string { return "spans" }
func (spanSource) Close() error  { return nil }
func (spanSource) Run(ctx context.Context, out pipeline.Consumer) error {
	var b record.Batch
	id := trace.ID{Hi: 0x0102030405060708, Lo: 0x1112131415161718}
	for _, s := range []trace.Span{
		{SpanID: 3, ParentID: 2, Operation: "SELECT items", Service: "db", Start: 30, End: 40},
		{SpanID: 4, ParentID: 2, Operation: "cache.get", Service: "api", Start: 41, End: 45},
		{SpanID: 2, ParentID: 1, Operation: "GET /items", Service: "api", Start: 20, End: 50},
		{SpanID: 1, Operation: "GET /", Service: "web", Start: 10, End: 60, Kind: trace.KindServer},
	} {
		trace.AppendSpan(&b, id, &s)
	}
	return out.Consume(ctx, &b)
}

// TestSpansBecomeExecutionsInTheKiekerLog: spans reach the Kieker log as
// OperationExecutionRecords once their trace is assembled, and the log
// assembles into the same tree (span names as operations, services as
// hosts).
func TestSpansBecomeExecutionsInTheKiekerLog(t *testing.T) {
	f := DefaultFactories()
	f.Receivers = append(f.Receivers, pipeline.NewReceiverFactory("spans", func() *toyConfig { return &toyConfig{Count: 1} },
		func(*toyConfig, pipeline.Settings) (pipeline.Receiver, error) { return spanSource{}, nil }))
	dir := t.TempDir()
	cfg := parse(t, "traces: {window: 50ms}\nreceivers: [{type: spans}]\nsinks: [{type: kieker-log, format: ascii}]\n")
	cfg.DataDir = dir
	s, err := Build(cfg, Settings{Factories: f})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := kiekerlog.Open(strings.TrimPrefix(s.Sinks[0].Where, "writing to "), kiekerlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []*trace.Trace
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) { got = append(got, tr) }})
	oers := 0
	err = r.Run(ctx, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			switch b.Records[i].Type.Name {
			case record.OperationExecutionRecord:
				oers++
			case trace.SpanTypeName:
				t.Error("a span record reached the Kieker log")
			}
		}
		a.AddBatch(b)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	a.Flush()
	if oers != 4 || len(got) != 1 || len(got[0].Broken) != 0 {
		t.Fatalf("%d executions, %d traces %v", oers, len(got), got)
	}
	var shape []string
	for _, sp := range got[0].Spans {
		shape = append(shape, strings.Repeat(" ", int(sp.Depth))+sp.Operation+"@"+sp.Host)
	}
	want := []string{"GET /@web", " GET /items@api", "  SELECT items@db", "  cache.get@api"}
	if strings.Join(shape, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tree from the log:\n%s\nwant:\n%s", strings.Join(shape, "\n"), strings.Join(want, "\n"))
	}
	if sp := got[0].Spans[0]; sp.Session != "<no-session-id>" || sp.KiekerTrace != 0x1112131415161718 || sp.Start != 10 || sp.End != 60 {
		t.Fatalf("root %+v", sp)
	}
}

// TestConsoleStopStartAddReceivers: receivers stop, start again on the
// same configuration and are added while the bridge runs.
func TestConsoleStopStartAddReceivers(t *testing.T) {
	cfg := parse(t, "receivers: [{name: k, type: kieker-tcp, listen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log}]\n")
	s, stop := start(t, cfg, Settings{})
	time.Sleep(50 * time.Millisecond)
	if err := s.StopReceiver("k"); err != nil {
		t.Fatal(err)
	}
	if st := s.ReceiverStatuses(); st[0].State != "stopped" {
		t.Fatalf("%+v", st)
	}
	if err := s.StartReceiver("k"); err != nil {
		t.Fatal(err)
	}
	if st := s.ReceiverStatuses(); st[0].State != "running" {
		t.Fatalf("%+v", st)
	}
	ep, err := s.AddReceiver(config.NewComponent("tcp-server", map[string]any{"listen": "127.0.0.1:0"}))
	if err != nil || !strings.HasPrefix(ep.Where, "listening on 127.0.0.1:") {
		t.Fatalf("%+v %v", ep, err)
	}
	if _, err := s.AddReceiver(config.NewComponent("tcp-server", map[string]any{"lisen": "x"})); err == nil || !strings.Contains(err.Error(), `unknown key "lisen"`) {
		t.Fatalf("bad form: %v", err)
	}
	y, _ := s.Config()
	if !strings.Contains(string(y), "tcp-server") {
		t.Fatalf("effective config:\n%s", y)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestJFRReceiverAddsProfileStage: a jfr receiver brings a profile stage
// unless one is configured; other configurations get none.
func TestJFRReceiverAddsProfileStage(t *testing.T) {
	types := func(cs []config.Component) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Type)
		}
		return strings.Fields(strings.Join(out, " "))
	}
	cfg := parse(t, "receivers:\n  - {type: jfr, repository: /r}\nstages:\n  - {type: timeunit, unit: us}\nsinks:\n  - {type: kieker-log}\n")
	if got := types(impliedStages(DefaultFactories(), cfg.Receivers, cfg.Stages)); strings.Join(got, ",") != "timeunit,profile" {
		t.Errorf("stages %v", got)
	}
	cfg = parse(t, "receivers:\n  - {type: jfr, repository: /r}\nstages:\n  - {type: profile, lines: true}\nsinks:\n  - {type: kieker-log}\n")
	if got := types(impliedStages(DefaultFactories(), cfg.Receivers, cfg.Stages)); strings.Join(got, ",") != "profile" {
		t.Errorf("stages %v", got)
	}
	cfg = parse(t, "receivers:\n  - {type: kieker-tcp, listen: \"127.0.0.1:0\"}\nsinks:\n  - {type: kieker-log}\n")
	if got := impliedStages(DefaultFactories(), cfg.Receivers, cfg.Stages); len(got) != 0 {
		t.Errorf("stages %v", got)
	}
	// It builds: the receiver, the stage, the sinks.
	dir := t.TempDir()
	cfg = parse(t, "receivers:\n  - {type: jfr, repository: "+filepath.Join(dir, "repo")+", types: [jdk.ExecutionSample], host: box, start: beginning}\nsinks:\n  - {type: kieker-log}\n")
	cfg.DataDir = dir
	s, err := Build(cfg, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Receivers) != 1 || s.Receivers[0].Type != "jfr" || !strings.Contains(s.Receivers[0].Where, "repo") {
		t.Fatalf("%+v", s.Receivers)
	}
	cfg = parse(t, "receivers:\n  - {type: jfr, repository: /r, start: middle}\nsinks:\n  - {type: kieker-log}\n")
	if _, err := Build(cfg, Settings{}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "start") {
		t.Fatalf("bad start: %v", err)
	}
}

// TestMetricsListenPolicy: the metrics endpoint (no TLS) listens off
// loopback only with metrics_insecure: true, and then warns once.
func TestMetricsListenPolicy(t *testing.T) {
	dir := t.TempDir()
	cfg := parse(t, "metrics: '0.0.0.0:0'\nmetrics_insecure: true\nreceivers: [{type: tcp-server, listen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log, path: "+dir+"}]")
	var logs logtest.Buffer
	s, err := Build(cfg, Settings{Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n := strings.Count(logs.String(), "metrics listens on"); n != 1 || !strings.Contains(logs.String(), "in plain text (insecure: true)") {
		t.Errorf("%d warnings:\n%s", n, logs.String())
	}
}

// TestFramesOnlyWhereCopied: receivers keep the frames they decode
// (pipeline.Settings.Frames) only when a sink copies them (a binary Kieker
// log) and no stage changes records; they keep records as frames only
// (Settings.FramesOnly) only when every sink is such a log, and then not
// the types a log reads (span records, the metadata record).
func TestFramesOnlyWhereCopied(t *testing.T) {
	cat := record.Builtin()
	for _, c := range []struct {
		yaml       string
		want, only bool
	}{
		{"sinks: [{type: kieker-log}]", true, true},
		{"sinks: [{type: kieker-log}, {type: kieker-log, name: two}]", true, true},
		{"sinks: [{type: kieker-log}, {type: kieker-log, name: two, format: ascii}]", true, false},
		{"sinks: [{type: kieker-log}, {type: store}]", true, false},
		{"sinks: [{type: kieker-log}]\nstream: {listen: \"127.0.0.1:0\"}", false, false},
		{"sinks: [{type: kieker-log, format: ascii}]", false, false},
		{"sinks: [{type: forward, url: \"kieker-tcp://127.0.0.1:1\"}]", false, false},
		{"sinks: [{type: kieker-log}]\nstages: [{type: timeunit, unit: us}]", false, false},
	} {
		f := DefaultFactories()
		var got *pipeline.Settings
		f.Receivers = append(f.Receivers, pipeline.NewReceiverFactory("frames", func() *toyConfig { return &toyConfig{Count: 1} },
			func(_ *toyConfig, set pipeline.Settings) (pipeline.Receiver, error) {
				got = &set
				return spanSource{}, nil
			}))
		cfg := parse(t, "receivers: [{type: frames}]\n"+c.yaml+"\n")
		cfg.DataDir = t.TempDir()
		s, err := Build(cfg, Settings{Factories: f})
		if err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		s.Close()
		if got == nil || got.Frames != c.want || (got.FramesOnly != nil) != c.only {
			t.Fatalf("%s: Frames %v, FramesOnly set %v; want %v, %v", c.yaml, got != nil && got.Frames, got != nil && got.FramesOnly != nil, c.want, c.only)
		}
		if c.only {
			for name, want := range map[string]bool{record.BeforeOperationEvent: true, record.OperationExecutionRecord: true,
				record.KiekerMetadataRecord: false, trace.SpanTypeName: false} {
				typ := cat.Lookup(name)
				if name == trace.SpanTypeName {
					typ = trace.SpanType
				}
				if got.FramesOnly(typ) != want {
					t.Errorf("%s: FramesOnly(%s) = %v, want %v", c.yaml, name, !want, want)
				}
			}
		}
	}
}
