package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	sink "github.com/tracebridge/tracebridge/internal/sink/stream"
	controlstage "github.com/tracebridge/tracebridge/internal/stage/control"
	"github.com/tracebridge/tracebridge/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var cat = record.Builtin()

// newSink starts a stream sink on a private embedded server.
func newSink(t *testing.T, cfg sink.Config) (*sink.Sink, *pipeline.Shared) {
	t.Helper()
	return newSinkPolicy(t, cfg, pipeline.BestEffort)
}

// newSinkPolicy starts a stream sink with a delivery policy.
func newSinkPolicy(t *testing.T, cfg sink.Config, policy pipeline.Policy) (*sink.Sink, *pipeline.Shared) {
	t.Helper()
	if cfg.Listen == "" && cfg.URL == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sh := &pipeline.Shared{}
	s, err := sink.New(&cfg, pipeline.Settings{Name: "stream", DataDir: t.TempDir(), Shared: sh, Catalog: cat, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, sh
}

// events returns a batch of a Kieker trace: TraceMetadata (host), then
// n Before/After pairs.
func events(host string, trace int64, n int) *record.Batch {
	b := &record.Batch{}
	b.Origin = record.Origin{Receiver: "test", Host: host}
	tm := b.Add(cat.Lookup(record.TraceMetadata), -1)
	tm.Values[0] = record.IntValue(trace)
	tm.Values[3] = record.StringValue(host)
	for i := range n {
		r := b.Add(cat.Lookup(record.BeforeOperationEvent), -1)
		r.Values[0] = record.IntValue(int64(1000 + i))
		r.Values[1] = record.IntValue(trace)
		r.Values[2] = record.IntValue(int64(2 * i))
		r.Values[3] = record.StringValue(fmt.Sprintf("public void a.B.m%d()", i))
		r.Values[4] = record.StringValue("a.B")
		a := b.Add(cat.Lookup(record.AfterOperationEvent), -1)
		a.Values[0] = record.IntValue(int64(1001 + i))
		a.Values[1] = record.IntValue(trace)
		a.Values[2] = record.IntValue(int64(2*i + 1))
		a.Values[3] = r.Values[3]
		a.Values[4] = r.Values[4]
	}
	return b
}

// collector records what a subscriber sees, in order.
type collector struct {
	mu     sync.Mutex
	events []string // "meta:N" and "TYPE host order"
	recs   int
	gaps   []stream.Gap
	errs   []error
	ready  chan struct{}
	once   sync.Once
}

func subscribe(t *testing.T, url string, setup func(*stream.Stream)) *collector {
	t.Helper()
	s, err := stream.Open(url, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{ready: make(chan struct{})}
	s.OnMetadata(func(m *stream.Metadata) {
		c.mu.Lock()
		c.events = append(c.events, fmt.Sprintf("meta:%d", len(m.Types)))
		c.mu.Unlock()
		c.once.Do(func() { close(c.ready) })
	})
	s.OnEvent("", func(e *stream.Event) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.recs++
		o := ""
		if v, ok := e.Field("orderIndex"); ok {
			o = fmt.Sprint(v.Int())
		}
		c.events = append(c.events, e.Type.ShortName()+" "+e.Host+" "+o)
	})
	s.OnGap(func(g stream.Gap) {
		c.mu.Lock()
		c.gaps = append(c.gaps, g)
		c.mu.Unlock()
	})
	s.OnError(func(err error) {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	})
	if setup != nil {
		setup(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Start(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; s.Close() })
	select {
	case <-c.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("no metadata")
	}
	return c
}

func (c *collector) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		got := c.recs
		ev := append([]string(nil), c.events...)
		c.mu.Unlock()
		if got >= n {
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records:\n%v", got, n, ev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPublishSubscribe: a subscriber sees the metadata first, every
// record in the order received (the parts of a batch put back together),
// and a new metadata version before the first record of a new type or
// host.
func TestPublishSubscribe(t *testing.T) {
	s, _ := newSink(t, sink.Config{})
	c := subscribe(t, authURL(s), nil)
	ctx := context.Background()
	if err := s.Consume(ctx, events("web-1", 1, 2)); err != nil {
		t.Fatal(err)
	}
	c.wait(t, 5)
	b := events("web-2", 2, 1)
	km := b.Add(cat.Lookup(record.KiekerMetadataRecord), -1)
	km.Values[4] = record.StringValue("web-2")
	if err := s.Consume(ctx, b); err != nil {
		t.Fatal(err)
	}
	got := c.wait(t, 9)
	want := []string{
		"meta:0", "meta:3",
		"TraceMetadata web-1 ", "BeforeOperationEvent web-1 0", "AfterOperationEvent web-1 1",
		"BeforeOperationEvent web-1 2", "AfterOperationEvent web-1 3",
		"meta:4", // the new host and KiekerMetadataRecord
		"TraceMetadata web-2 ", "BeforeOperationEvent web-2 0", "AfterOperationEvent web-2 1", "KiekerMetadataRecord web-2 ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	st := s.Stats()
	if st.Published != 9 || st.Lost != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPerRecordHost: a batch without a host (a broker's) goes to the
// hosts its records name, where they name one.
func TestPerRecordHost(t *testing.T) {
	s, _ := newSink(t, sink.Config{})
	c := subscribe(t, authURL(s), func(st *stream.Stream) { st.SetHosts("b") })
	b := &record.Batch{}
	for i, h := range []string{"a", "b", "a", "b"} {
		r := b.Add(cat.Lookup(record.OperationExecutionRecord), -1)
		r.Values[0] = record.StringValue("op")
		r.Values[2] = record.IntValue(int64(i))
		r.Values[5] = record.StringValue(h)
		r.Values[6] = record.IntValue(int64(i))
	}
	s.Consume(context.Background(), b)
	got := c.wait(t, 2)
	if diff := cmp.Diff([]string{"meta:0", "meta:1", "OperationExecutionRecord b ", "OperationExecutionRecord b "}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// seqOf returns the repository sequence of the first record of trace id
// a subscriber from the start sees.
func seqs(t *testing.T, url string, n int) map[int64]uint64 {
	t.Helper()
	out := map[int64]uint64{}
	var mu sync.Mutex
	c := subscribe(t, url, func(st *stream.Stream) {
		st.SetStartSequence(1)
		st.OnEvent("TraceMetadata", func(e *stream.Event) {
			mu.Lock()
			out[e.Values[0].Int()] = e.Seq
			mu.Unlock()
		})
	})
	c.wait(t, n)
	mu.Lock()
	defer mu.Unlock()
	// A copy: the subscriber goes on (live records write to out).
	return maps.Clone(out)
}

// TestReplay: a subscriber starts at a sequence, or at a time, then
// follows live.
func TestReplay(t *testing.T) {
	traces := func(c *collector) []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []string
		for _, e := range c.events {
			if len(e) > 13 && e[:13] == "TraceMetadata" {
				out = append(out, e)
			}
		}
		return out
	}
	// Each case has a sink of its own: a trace one case sends live must
	// not be in the other's replay.
	for _, name := range []string{"sequence", "time"} {
		t.Run(name, func(t *testing.T) {
			s, _ := newSink(t, sink.Config{})
			ctx := context.Background()
			s.Consume(ctx, events("h", 1, 1))
			time.Sleep(100 * time.Millisecond)
			mid := time.Now()
			time.Sleep(100 * time.Millisecond)
			s.Consume(ctx, events("h", 2, 1))
			s.Consume(ctx, events("h", 3, 1))
			first := seqs(t, authURL(s), 9)
			if len(first) != 3 || !(first[1] < first[2] && first[2] < first[3]) {
				t.Fatalf("sequences %v", first)
			}
			setup := func(st *stream.Stream) { st.SetStartSequence(first[2]) }
			if name == "time" {
				setup = func(st *stream.Stream) { st.SetStartTime(mid) }
			}
			c := subscribe(t, authURL(s), setup)
			c.wait(t, 6)
			s.Consume(ctx, events("h", 4, 1)) // then live
			c.wait(t, 9)
			if got := traces(c); len(got) != 3 {
				t.Fatalf("traces %v", got)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.recs != 9 {
				t.Fatalf("%d records: %v", c.recs, c.events)
			}
		})
	}
}

// TestSlowSubscriberGap: a subscriber that stalls while retention (by
// size) removes what it has not read is told how many records it missed;
// the bridge never waits for it.
func TestSlowSubscriberGap(t *testing.T) {
	mb := pipeline.ByteSize(64 << 10)
	s, _ := newSink(t, sink.Config{MaxBytes: &mb})
	release := make(chan struct{})
	var once sync.Once
	c := subscribe(t, authURL(s), func(st *stream.Stream) {
		st.OnEvent("", func(*stream.Event) { once.Do(func() { <-release }) })
	})
	ctx := context.Background()
	const batches = 3000
	start := time.Now()
	for i := range batches {
		b := &record.Batch{Origin: record.Origin{Host: "h"}}
		r := b.Add(cat.Lookup(record.BeforeOperationEvent), -1)
		r.Values[1] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue(fmt.Sprintf("public void a.B.padding%0200d()", i))
		if err := s.Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("publishing %d batches took %v with a stalled subscriber", batches, d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Published < batches && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	deadline = time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		var missed uint64
		for _, g := range c.gaps {
			missed += g.Records
		}
		seen, gaps := c.recs, len(c.gaps)
		c.mu.Unlock()
		if uint64(seen)+missed == batches && gaps > 0 {
			t.Logf("read %d, missed %d in %d gaps", seen, missed, gaps)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d, missed %d in %d gaps, of %d", seen, missed, gaps, batches)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJSONEncoding: data messages in JSON, read by the Go API as binary
// ones are.
func TestJSONEncoding(t *testing.T) {
	s, _ := newSink(t, sink.Config{Encoding: "json"})
	c := subscribe(t, authURL(s), nil)
	s.Consume(context.Background(), events("web-1", 1, 1))
	got := c.wait(t, 3)
	if diff := cmp.Diff([]string{"meta:0", "meta:3", "TraceMetadata web-1 ", "BeforeOperationEvent web-1 0", "AfterOperationEvent web-1 1"}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestRestart: a bridge started again on the same repository goes on
// with the metadata's versions and type ids, so what the first run
// published stays readable.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *sink.Sink {
		cfg := sink.Config{Listen: "127.0.0.1:0"}
		s, err := sink.New(&cfg, pipeline.Settings{DataDir: dir, Shared: &pipeline.Shared{}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	s.Consume(context.Background(), events("h", 1, 1))
	time.Sleep(300 * time.Millisecond)
	s.Close()
	s = start()
	defer s.Close()
	b := &record.Batch{Origin: record.Origin{Host: "h"}}
	b.Add(cat.Lookup(record.KiekerMetadataRecord), -1)
	s.Consume(context.Background(), b)
	s.Consume(context.Background(), events("h", 2, 1))
	var runs []uint64
	var last *stream.Metadata
	var mu sync.Mutex
	c := subscribe(t, authURL(s), func(st *stream.Stream) {
		st.SetStartSequence(1)
		st.OnEvent("", func(e *stream.Event) {
			mu.Lock()
			runs = append(runs, e.Run)
			mu.Unlock()
		})
		// The second run may publish its metadata more than once (at start,
		// then with the new type): what counts is where it ends.
		st.OnMetadata(func(m *stream.Metadata) {
			mu.Lock()
			last = m
			mu.Unlock()
		})
	})
	c.wait(t, 7)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]uint64{1, 1, 1, 2, 2, 2, 2}, runs); diff != "" {
		t.Fatalf("runs (-want +got):\n%s", diff)
	}
	if m := last; m == nil || m.Run != 2 || len(m.Types) != 4 || m.Types[3].Name != record.KiekerMetadataRecord || m.Types[3].ID != 4 {
		t.Fatalf("last metadata %+v", m)
	}
}

// request sends a control request to the bridge at url.
func request(t *testing.T, url string, req streammsg.ControlRequest, token string) streammsg.ControlReply {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m := natsgo.NewMsg(streammsg.Subjects{}.Control())
	m.Data, _ = json.Marshal(req)
	if token != "" {
		m.Header.Set(streammsg.TokenHeader, token)
	}
	// The sink subscribes to control requests once it has connected,
	// which may be after New returns: no responders yet is waited out.
	var r *natsgo.Msg
	for deadline := time.Now().Add(30 * time.Second); ; {
		r, err = nc.RequestMsg(m, 5*time.Second)
		if !errors.Is(err, natsgo.ErrNoResponders) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	var rep streammsg.ControlReply
	if err := json.Unmarshal(r.Data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestControl: control commands change what the control stage lets
// through, are announced in the metadata, survive a restart, and are
// checked: malformed commands and unknown types get clear errors.
func TestControl(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "control.json")
	sh := &pipeline.Shared{}
	ctl, err := control.Shared(sh, control.Options{StateFile: state})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sink.Config{Listen: "127.0.0.1:0"}
	s, err := sink.New(&cfg, pipeline.Settings{DataDir: dir, Shared: sh})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var metas []*stream.Metadata
	var mu sync.Mutex
	c := subscribe(t, authURL(s), func(st *stream.Stream) {
		st.OnMetadata(func(m *stream.Metadata) {
			mu.Lock()
			metas = append(metas, m)
			mu.Unlock()
		})
	})

	// The stage in front of a sink that counts types.
	counts := map[string]int{}
	var out pipeline.Consumer = pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			counts[b.Records[i].Type.ShortName()]++
		}
		return s.Consume(context.Background(), b)
	})
	stage := controlstage.Stage(ctl)(out)
	ctx := context.Background()

	for _, tc := range []struct {
		req  streammsg.ControlRequest
		want string // in the error, "" for success
	}{
		{streammsg.ControlRequest{Op: "disable", Type: "BeforeOperationEvent"}, ""},
		{streammsg.ControlRequest{Op: "disable", Host: "web-2"}, ""},
		{streammsg.ControlRequest{Op: "sample", Type: "kieker.common.record.flow.trace.TraceMetadata", Rate: 0.5}, ""},
		{streammsg.ControlRequest{Op: "disable", Type: "NoSuchRecord"}, "unknown record type"},
		{streammsg.ControlRequest{Op: "sample", Type: "TraceMetadata", Rate: 2}, "sample rate"},
		{streammsg.ControlRequest{Op: "explode"}, "unknown operation"},
		{streammsg.ControlRequest{Op: "probe", Pattern: "*"}, "no probe controllers"},
	} {
		rep := request(t, authURL(s), tc.req, "")
		if tc.want == "" && !rep.OK || tc.want != "" && (rep.OK || !strings.Contains(rep.Error, tc.want)) {
			t.Errorf("%+v: %+v", tc.req, rep)
		}
	}
	for trace := range int64(40) {
		host := "web-1"
		if trace%4 == 0 {
			host = "web-2"
		}
		if err := stage.Consume(ctx, events(host, trace, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if counts["BeforeOperationEvent"] != 0 || counts["AfterOperationEvent"] != 60 || counts["TraceMetadata"] < 5 || counts["TraceMetadata"] > 25 {
		t.Fatalf("counts %v", counts)
	}
	c.wait(t, 60+counts["TraceMetadata"]) // the metadata came before
	mu.Lock()
	var words []string
	for _, m := range metas {
		words = append(words, m.Added.Control...)
	}
	mu.Unlock()
	want := []string{"disable kieker.common.record.flow.trace.operation.BeforeOperationEvent", "disable host:web-2", "sample kieker.common.record.flow.trace.TraceMetadata 0.5"}
	if diff := cmp.Diff(want, words); diff != "" {
		t.Errorf("announced (-want +got):\n%s", diff)
	}

	// Survives a restart.
	again, err := control.Open(control.Options{StateFile: state})
	if err != nil {
		t.Fatal(err)
	}
	if st := again.State(); len(st.DisabledTypes) != 1 || len(st.DisabledHosts) != 1 || len(st.Samples) != 1 {
		t.Fatalf("state after a restart: %+v", st)
	}
	// Malformed JSON.
	nc, _ := natsgo.Connect(authURL(s))
	defer nc.Close()
	r, err := nc.Request(streammsg.Subjects{}.Control(), []byte("{nope"), 5*time.Second)
	if err != nil || !strings.Contains(string(r.Data), "malformed control request") {
		t.Fatalf("%s %v", r.Data, err)
	}
}

// TestControlAuthorization: with a token file, only requests with the
// token are taken; without one, only loopback clients of the embedded
// server; over an external server, nothing without a token.
func TestControlAuthorization(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	disable := streammsg.ControlRequest{Op: "disable", Type: "TraceMetadata"}

	start := func(cfg sink.Config) *sink.Sink {
		sh := &pipeline.Shared{}
		if _, err := control.Shared(sh, control.Options{}); err != nil {
			t.Fatal(err)
		}
		s, err := sink.New(&cfg, pipeline.Settings{DataDir: t.TempDir(), Shared: sh})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := start(sink.Config{Listen: "127.0.0.1:0", ControlTokenFile: tokenFile})
	if rep := request(t, authURL(s), disable, ""); rep.OK || !strings.Contains(rep.Error, "token") {
		t.Errorf("without the token: %+v", rep)
	}
	if rep := request(t, authURL(s), disable, "wrong"); rep.OK {
		t.Errorf("a wrong token: %+v", rep)
	}
	if rep := request(t, authURL(s), disable, "s3cret"); !rep.OK {
		t.Errorf("the token: %+v", rep)
	}
	if rep := request(t, authURL(s), streammsg.ControlRequest{Op: "status"}, ""); !rep.OK || len(rep.Control.DisabledTypes) != 1 {
		t.Errorf("status: %+v", rep)
	}

	// No token: loopback only (the server binds loopback, as tests do;
	// TestLoopbackOnly refuses other addresses).
	s = start(sink.Config{Listen: "127.0.0.1:0"})
	if rep := request(t, authURL(s), disable, ""); !rep.OK {
		t.Errorf("from loopback: %+v", rep)
	}

	// An external server: a token is needed.
	ext, err := natsd.Start(natsd.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Shutdown()
	ec := ext.Credentials()
	s = start(sink.Config{URL: "nats://" + ext.Addr(), User: ec.User, Password: ec.Password})
	if rep := request(t, authURL(s), disable, ""); rep.OK || !strings.Contains(rep.Error, "external") {
		t.Errorf("external server without a token: %+v", rep)
	}
}

// TestDropped: records the engine drops because the sink is behind are
// counted per subject, so a subscriber is told exactly what it missed.
func TestDropped(t *testing.T) {
	s, _ := newSink(t, sink.Config{})
	c := subscribe(t, authURL(s), nil)
	ctx := context.Background()
	s.Consume(ctx, events("h", 1, 1))
	s.Dropped(events("h", 2, 3))
	s.Consume(ctx, events("h", 3, 1))
	c.wait(t, 6)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		got := map[string]uint64{}
		for _, g := range c.gaps {
			got[g.Type[strings.LastIndexByte(g.Type, '.')+1:]] += g.Records
		}
		c.mu.Unlock()
		if got["TraceMetadata"] == 1 && got["BeforeOperationEvent"] == 3 && got["AfterOperationEvent"] == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gaps %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.Lost != 7 {
		t.Fatalf("stats %+v", st)
	}
}

// authURL is the sink's URL with the credential its server wants (the
// embedded server's; none for an external one without).
func authURL(s *sink.Sink) string {
	user, pass := s.Credentials()
	if user == "" {
		return s.URL()
	}
	return strings.Replace(s.URL(), "://", "://"+url.UserPassword(user, pass).String()+"@", 1)
}

// TestEmbeddedServerAuthentication: the embedded server the stream
// starts refuses a client without the credential under the data
// directory and takes one with it; the credential file is the one
// clients on the machine read.
func TestEmbeddedServerAuthentication(t *testing.T) {
	dataDir := t.TempDir()
	cfg := sink.Config{Listen: "127.0.0.1:0"}
	s, err := sink.New(&cfg, pipeline.Settings{Name: "stream", DataDir: dataDir, Shared: &pipeline.Shared{}, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := stream.Open(s.URL(), stream.Options{}); err == nil || !strings.Contains(err.Error(), "Authorization") {
		t.Fatalf("a client without the credential: %v, want refused", err)
	}
	if nc, err := natsgo.Connect(s.URL()); err == nil {
		nc.Close()
		t.Fatal("a NATS client without the credential connected")
	}
	st, err := stream.Open(s.URL(), stream.Options{DataDir: dataDir})
	if err != nil {
		t.Fatalf("a client with the data directory's credential: %v", err)
	}
	st.Close()
	user, pass, err := stream.ReadCredentials(stream.CredentialsFile(dataDir))
	if u, p := s.Credentials(); err != nil || u != user || p != pass {
		t.Fatalf("credentials file %q %v, the sink's %q", user, err, u)
	}
}

// TestListenPolicy: the stream's embedded server follows the listener
// policy: off loopback without TLS the configuration is refused naming
// listen and the fix; insecure: true allows it; an external server's URL
// takes neither key.
func TestListenPolicy(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:14222", ":14222", "[::]:14222", "192.0.2.1:14222"} {
		c := sink.Config{Listen: addr}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "listen "+addr) || !strings.Contains(err.Error(), "insecure: true") || !strings.Contains(err.Error(), "tls: {cert, key}") {
			t.Errorf("%s without tls: %v; want a refusal naming listen and the fix", addr, err)
		}
		c.Insecure = true
		if err := c.Validate(); err != nil {
			t.Errorf("%s with insecure: true: %v", addr, err)
		}
	}
	for _, c := range []sink.Config{{Listen: "127.0.0.1:14222"}, {Listen: "localhost:14222"}, {}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (&sink.Config{URL: "nats://10.0.0.1:4222", Insecure: true}).Validate(); err == nil {
		t.Error("insecure with url: accepted")
	}
}

// TestDurable: with policy durable, an outbox far smaller than what is
// consumed drops nothing (Consume waits for room), and once Flush
// returns the server has stored every message consumed before it (a
// broker's acknowledgement waits for Flush): the repository gets no
// message after it.
func TestDurable(t *testing.T) {
	s, _ := newSinkPolicy(t, sink.Config{Buffer: 4 << 10, MaxPending: 8}, pipeline.Durable)
	ctx := context.Background()
	const batches, pairs = 200, 20
	for i := range batches {
		if err := s.Consume(ctx, events("h", int64(i), pairs)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect(authURL(s))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.StreamInfo("TRACEBRIDGE")
	if err != nil {
		t.Fatal(err)
	}
	stored := info.State.Msgs
	// Every record is there, none missed, in a repository that did not
	// grow after Flush.
	const want = batches * (1 + 2*pairs)
	c := subscribe(t, authURL(s), func(st *stream.Stream) { st.SetStartSequence(1) })
	c.wait(t, want)
	if info, err = js.StreamInfo("TRACEBRIDGE"); err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != stored {
		t.Errorf("the repository had %d messages when Flush returned, %d later", stored, info.State.Msgs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs != want || len(c.gaps) != 0 {
		t.Errorf("%d records (want %d), gaps %v", c.recs, want, c.gaps)
	}
	if st := s.Stats(); st.Lost != 0 || st.Published != want {
		t.Errorf("stats %+v", st)
	}
}

// TestDurableAbort: a durable Consume waiting for room returns once the
// sink is aborted (shutdown), with an error wrapping ErrClosed.
func TestDurableAbort(t *testing.T) {
	s, _ := newSinkPolicy(t, sink.Config{Buffer: 1 << 10, MaxPending: 1}, pipeline.Durable)
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; err == nil; i++ {
			err = s.Consume(context.Background(), events("h", int64(i), 50))
		}
		done <- err
	}()
	s.Abort()
	select {
	case err := <-done:
		if !errors.Is(err, pipeline.ErrClosed) {
			t.Fatalf("Consume after Abort: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Consume did not return after Abort")
	}
}

// TestPacking: while batches wait in the engine's queue, consecutive
// batches of one origin go out as one batch (one message per part, not
// one per part of each): a subscriber gets every record in order, and a
// batch of another origin, one the engine dropped and an empty queue each
// publish what was packed first.
func TestPacking(t *testing.T) {
	s, _ := newSink(t, sink.Config{})
	var backlog atomic.Int64
	s.SetBacklog(func() int { return int(backlog.Load()) })
	c := subscribe(t, authURL(s), nil)
	ctx := context.Background()
	stored := func() uint64 {
		t.Helper()
		nc, err := natsgo.Connect(authURL(s))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := nc.JetStream()
		if err != nil {
			t.Fatal(err)
		}
		info, err := js.StreamInfo("TRACEBRIDGE")
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	// Four batches of trace 1..4 (3 parts each), three of them with
	// more queued behind: one batch of 3 parts.
	for i := range 4 {
		backlog.Store(int64(3 - i))
		if err := s.Consume(ctx, events("h", int64(i+1), 2)); err != nil {
			t.Fatal(err)
		}
	}
	c.wait(t, 4*5)
	if n := stored(); n != 3 {
		t.Errorf("%d messages for 4 packed batches, want 3", n)
	}
	if st := s.Stats(); st.Packed != 3 {
		t.Errorf("stats %+v, want 3 packed", st)
	}
	// Packed, then a batch of another host: the packed one goes first.
	backlog.Store(5)
	s.Consume(ctx, events("h", 5, 1))
	s.Consume(ctx, events("other", 6, 1))
	// Packed, then one dropped: the packed batch, then the gap.
	s.Consume(ctx, events("h", 7, 1))
	s.Dropped(events("h", 8, 1))
	backlog.Store(0)
	s.Consume(ctx, events("h", 9, 1))
	got := c.wait(t, 4*5+4*3)
	var order []string
	for _, e := range got {
		if strings.HasPrefix(e, "TraceMetadata") {
			order = append(order, e)
		}
	}
	want := []string{"TraceMetadata h ", "TraceMetadata h ", "TraceMetadata h ", "TraceMetadata h ", "TraceMetadata h ", "TraceMetadata other ", "TraceMetadata h ", "TraceMetadata h "}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var before []string
	for _, e := range got {
		if strings.HasPrefix(e, "BeforeOperationEvent h") || strings.HasPrefix(e, "AfterOperationEvent h") {
			before = append(before, e[:strings.IndexByte(e, ' ')]+e[strings.LastIndexByte(e, ' '):])
		}
	}
	// Each trace's events in order: Before 0, After 1, Before 2, After 3.
	if len(before) != 4*4+3*2 {
		t.Fatalf("%d events of host h: %v", len(before), before)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		var missed uint64
		for _, g := range c.gaps {
			missed += g.Records
		}
		c.mu.Unlock()
		if missed == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("told of %d missed records, want 3", missed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
