package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	sink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/trace"
	"github.com/tracebridge/tracebridge/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var cat = trace.Types()

func bridge(t *testing.T) *sink.Sink {
	t.Helper()
	b, err := sink.New(&sink.Config{Listen: "127.0.0.1:0"}, pipeline.Settings{DataDir: t.TempDir(), Shared: &pipeline.Shared{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// kiekerTrace is a Kieker trace of n calls from host.
func kiekerTrace(host string, id int64, n int) *record.Batch {
	b := &record.Batch{Origin: record.Origin{Receiver: "t", Host: host}}
	tm := b.Add(cat.Lookup(record.TraceMetadata), -1)
	tm.Values[0] = record.IntValue(id)
	tm.Values[3] = record.StringValue(host)
	tm.Values[4] = record.IntValue(-1)
	tm.Values[5] = record.IntValue(-1)
	ts := time.Now().UnixNano()
	for i := range n {
		r := b.Add(cat.Lookup(record.BeforeOperationEvent), -1)
		r.Values[0] = record.IntValue(ts + int64(10*i))
		r.Values[1] = record.IntValue(id)
		r.Values[2] = record.IntValue(int64(2 * i))
		r.Values[3] = record.StringValue("public void a.B.m()")
		r.Values[4] = record.StringValue("a.B")
		a := b.Add(cat.Lookup(record.AfterOperationEvent), -1)
		a.Values[0] = record.IntValue(ts + int64(10*i+5))
		a.Values[1] = record.IntValue(id)
		a.Values[2] = record.IntValue(int64(2*i + 1))
		a.Values[3] = r.Values[3]
		a.Values[4] = r.Values[4]
	}
	return b
}

// waitStored waits until a subscriber from the start has n records.
func waitStored(t *testing.T, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := stream.Open(url, stream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Dump(context.Background(), t.TempDir(), stream.DumpOptions{})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Records >= int64(n)+1 { // + the dump's own metadata record
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records stored, want %d", st.Records-1, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readLog(t *testing.T, dir string) []record.Record {
	t.Helper()
	return bridgetest.ReadLogWith(t, dir, kiekerlog.Options{Catalog: cat})
}

// TestDump writes windows of the repository as Kieker logs (ASCII and
// binary) and OTLP JSON, by time, type and host.
func TestDump(t *testing.T) {
	b := bridge(t)
	ctx := context.Background()
	b.Consume(ctx, kiekerTrace("web-1", 1, 2))
	time.Sleep(50 * time.Millisecond)
	mid := time.Now()
	time.Sleep(50 * time.Millisecond)
	b.Consume(ctx, kiekerTrace("web-2", 2, 3))
	b.Consume(ctx, kiekerTrace("web-1", 3, 1))
	waitStored(t, authURL(b), 5+7+3)
	s, err := stream.Open(authURL(b), stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	for _, tc := range []struct {
		name   string
		o      stream.DumpOptions
		counts map[string]int
	}{
		{"all", stream.DumpOptions{}, map[string]int{"KiekerMetadataRecord": 1, "TraceMetadata": 3, "BeforeOperationEvent": 6, "AfterOperationEvent": 6}},
		{"binary since", stream.DumpOptions{Format: stream.FormatKiekerBinary, Since: mid}, map[string]int{"KiekerMetadataRecord": 1, "TraceMetadata": 2, "BeforeOperationEvent": 4, "AfterOperationEvent": 4}},
		{"until", stream.DumpOptions{Until: mid}, map[string]int{"KiekerMetadataRecord": 1, "TraceMetadata": 1, "BeforeOperationEvent": 2, "AfterOperationEvent": 2}},
		{"type and host", stream.DumpOptions{Types: []string{"BeforeOperationEvent"}, Hosts: []string{"web-1"}}, map[string]int{"KiekerMetadataRecord": 1, "BeforeOperationEvent": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			st, err := s.Dump(ctx, out, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(st.Dir, out) {
				t.Fatalf("log in %s", st.Dir)
			}
			got := map[string]int{}
			for _, r := range readLog(t, st.Dir) {
				got[r.Type.ShortName()]++
			}
			if len(got) != len(tc.counts) {
				t.Fatalf("counts %v, want %v", got, tc.counts)
			}
			for k, n := range tc.counts {
				if got[k] != n {
					t.Fatalf("counts %v, want %v", got, tc.counts)
				}
			}
			bin, _ := filepath.Glob(filepath.Join(st.Dir, "*.bin"))
			if (tc.o.Format == stream.FormatKiekerBinary) != (len(bin) > 0) {
				t.Errorf("format %q wrote %v", tc.o.Format, bin)
			}
		})
	}

	t.Run("otlp-json", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "traces.json")
		st, err := s.Dump(ctx, file, stream.DumpOptions{Format: stream.FormatOTLPJSON})
		if err != nil {
			t.Fatal(err)
		}
		if st.Traces != 3 || st.Spans != 6 {
			t.Fatalf("stats %+v", st)
		}
		f, _ := os.Open(file)
		defer f.Close()
		sc := bufio.NewScanner(f)
		lines := 0
		for sc.Scan() {
			lines++
			var req struct {
				ResourceSpans []struct {
					Resource struct {
						Attributes []struct {
							Key   string
							Value map[string]any
						}
					}
					ScopeSpans []struct {
						Spans []struct {
							TraceID, SpanID, Name, StartTimeUnixNano string
							Kind                                     int
						}
					}
				}
			}
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				t.Fatalf("%v: %s", err, sc.Text())
			}
			sp := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
			if len(sp.TraceID) != 32 || len(sp.SpanID) != 16 || sp.Name != "public void a.B.m()" || sp.Kind != 1 || sp.StartTimeUnixNano == "" {
				t.Fatalf("span %+v", sp)
			}
			// A Kieker call's resource is its host: service.name (as
			// Jaeger names a Kieker host's spans) and host.name.
			if a := req.ResourceSpans[0].Resource.Attributes; len(a) != 2 || a[0].Key != "service.name" || a[1].Key != "host.name" ||
				a[0].Value["stringValue"] == "" || a[0].Value["stringValue"] != a[1].Value["stringValue"] {
				t.Fatalf("resource %+v", a)
			}
		}
		if lines != 3 {
			t.Fatalf("%d lines", lines)
		}
	})
	if _, err := s.Dump(ctx, t.TempDir(), stream.DumpOptions{Format: "pdf"}); err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("format pdf: %v", err)
	}

	// Every reader's consumers went with it (the dumps' and
	// waitStored's), not at their inactive threshold.
	js := repository(t, b)
	for _, name := range []string{streammsg.Subjects{}.Stream(), streammsg.Subjects{}.MetaStream()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if left := consumers(t, ctx, st); len(left) != 0 {
			t.Errorf("consumers left on %s after every reader stopped: %v", name, left)
		}
	}
}

// TestWebSocket: a browser subscribes with a filter and gets the
// metadata, then its records in JSON; bad input is refused before the
// upgrade.
func TestWebSocket(t *testing.T) {
	b := bridge(t)
	ctx := context.Background()
	b.Consume(ctx, kiekerTrace("web-1", 1, 1))
	waitStored(t, authURL(b), 3)
	h := stream.NewHandler(authURL(b), stream.HandlerOptions{})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")

	for _, q := range []string{"?type=NoSuchRecord", "?since=yesterday", "?from_seq=x", "?since=1m&from_seq=1"} {
		_, resp, err := websocket.DefaultDialer.Dial(ws+q, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %v %v", q, resp, err)
		}
	}
	if resp, err := http.Get(srv.URL); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain GET: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()

	c, _, err := websocket.DefaultDialer.Dial(ws+"?type=BeforeOperationEvent&type=TraceMetadata&from_seq=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b.Consume(ctx, kiekerTrace("web-2", 2, 1))
	var kinds []string
	records := 0
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for records < 4 {
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("%v after %v", err, kinds)
		}
		var m struct {
			Kind    string
			Records []struct {
				Host   string
				Record struct{ Type string }
			}
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("%v: %s", err, msg)
		}
		kinds = append(kinds, m.Kind)
		for _, r := range m.Records {
			if strings.HasSuffix(r.Record.Type, "AfterOperationEvent") {
				t.Errorf("a record of a type not asked for: %+v", r)
			}
			records++
		}
	}
	if kinds[0] != "metadata" {
		t.Fatalf("kinds %v", kinds)
	}
}

// TestWebSocketUnknownParameter: /api/live refuses a parameter it does not
// read, as every endpoint of the HTTP API does: 400 before the upgrade,
// naming the parameter and the ones it takes; known ones still connect.
func TestWebSocketUnknownParameter(t *testing.T) {
	b := bridge(t)
	h := stream.NewHandler(authURL(b), stream.HandlerOptions{})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")
	for q, want := range map[string]string{
		"?limit=10":                     `unknown parameter "limit" (GET /api/live takes type, host, since, from_seq, traces)`,
		"?type=TraceMetadata&Type=x":    `unknown parameter "Type" (`,
		"?traces=1&trace=1&from_seq=1":  `unknown parameter "trace" (`,
		"?host=a&hosts=b&since=1m&zz=1": `unknown parameter "hosts", "zz" (`,
	} {
		_, resp, err := websocket.DefaultDialer.Dial(ws+q, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %v %v", q, resp, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(body), want) {
			t.Errorf("%s: body %q, want it to start with %q", q, body, want)
		}
	}
	c, _, err := websocket.DefaultDialer.Dial(ws+"?type=TraceMetadata&host=h&from_seq=1&traces=1", nil)
	if err != nil {
		t.Fatalf("known parameters refused: %v", err)
	}
	c.Close()
}

// TestWebSocketClientCap: beyond MaxClients a client is closed right after
// the handshake with 1013 (try again later) naming the limit; once a client
// leaves, a new one gets in.
func TestWebSocketClientCap(t *testing.T) {
	b := bridge(t)
	b.Consume(context.Background(), kiekerTrace("web-1", 1, 1))
	waitStored(t, authURL(b), 3)
	h := stream.NewHandler(authURL(b), stream.HandlerOptions{MaxClients: 2})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "?from_seq=1"
	// connect dials and reads the first message: the metadata, or the
	// close error.
	connect := func() (*websocket.Conn, error) {
		c, _, err := websocket.DefaultDialer.Dial(ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, msg, err := c.ReadMessage(); err != nil {
			c.Close()
			return nil, err
		} else if !strings.HasPrefix(string(msg), `{"kind":"metadata"`) {
			t.Fatalf("first message %.80s", msg)
		}
		return c, nil
	}
	var open []*websocket.Conn
	for range 2 {
		c, err := connect()
		if err != nil {
			t.Fatalf("a client within the limit: %v", err)
		}
		open = append(open, c)
	}
	for range 3 {
		_, err := connect()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseTryAgainLater || ce.Text != "too many live clients (limit 2)" {
			t.Fatalf("a client over the limit: %v, want close 1013 naming the limit", err)
		}
	}
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := connect()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client got in after one left: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	open[1].Close()
}

// TestWebSocketSlowClient: a client that falls behind by more than
// MaxClientBuffer bytes is closed with CloseTooSlow and the reason "client
// too slow" after the messages it already had, with one log line; a client
// of the same handler that reads goes on and gets every record.
func TestWebSocketSlowClient(t *testing.T) {
	const batches, calls = 12, 2000
	const total = batches * (2*calls + 1)
	b := bridge(t)
	for i := range batches {
		b.Consume(context.Background(), kiekerTrace("web-1", int64(i+1), calls))
	}
	waitStored(t, authURL(b), total)
	var logs logtest.Buffer
	h := stream.NewHandler(authURL(b), stream.HandlerOptions{MaxClientBuffer: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "?from_seq=1"

	// The slow client takes nothing until the handler gave up on it (the
	// kernel's socket buffers take a few MiB first).
	slow, _, err := websocket.DefaultDialer.Dial(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, _, err := websocket.DefaultDialer.Dial(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	fastDone := make(chan error, 1)
	var fastRecords, fastBytes int
	go func() {
		fast.SetReadDeadline(time.Now().Add(60 * time.Second))
		for fastRecords < total {
			_, msg, err := fast.ReadMessage()
			if err != nil {
				fastDone <- err
				return
			}
			fastBytes += len(msg)
			var m struct{ Records []json.RawMessage }
			if err := json.Unmarshal(msg, &m); err != nil {
				fastDone <- err
				return
			}
			fastRecords += len(m.Records)
		}
		fastDone <- nil
	}()

	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logs.String(), "client too slow") {
		if time.Now().After(deadline) {
			t.Fatalf("the slow client was not closed; log: %s", logs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := 0
	for {
		_, msg, err := slow.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != stream.CloseTooSlow || !strings.HasPrefix(ce.Text, "client too slow") {
				t.Fatalf("after %d records: %v, want close %d \"client too slow\"; log:\n%s", got, err, stream.CloseTooSlow, logs.String())
			}
			break
		}
		var m struct{ Records []json.RawMessage }
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("a message before the close: %v", err)
		}
		got += len(m.Records)
	}
	if got >= total {
		t.Errorf("the slow client got all %d records", got)
	}
	if err := <-fastDone; err != nil {
		t.Fatalf("the reading client after %d of %d records: %v", fastRecords, total, err)
	}
	t.Logf("slow client: %d records before the close; reading client: %d records in %d bytes", got, fastRecords, fastBytes)
	if n := strings.Count(logs.String(), "client too slow"); n != 1 {
		t.Errorf("%d log lines about a slow client, want 1:\n%s", n, logs.String())
	}
}

func TestErrors(t *testing.T) {
	if _, err := stream.Open("127.0.0.1:4222", stream.Options{}); err == nil {
		t.Error("a URL without a scheme accepted")
	}
	srv, err := natsd.Start(natsd.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	c := srv.Credentials()
	s, err := stream.Open("nats://"+srv.Addr(), stream.Options{User: c.User, Password: c.Password})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(context.Background()); !errors.Is(err, stream.ErrNoStream) {
		t.Errorf("a server without a stream: %v", err)
	}
}

func TestResolveTypes(t *testing.T) {
	md := &stream.Metadata{Types: []stream.TypeInfo{{Name: "a.X"}, {Name: "b.X"}, {Name: "a.Y"}}}
	got, err := stream.ResolveTypes(md, []string{"Y", "a.X"})
	if err != nil || len(got) != 2 || got[0] != "a.Y" || got[1] != "a.X" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := stream.ResolveTypes(md, []string{"X"}); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous: %v", err)
	}
	if _, err := stream.ResolveTypes(md, []string{"Z"}); !errors.Is(err, stream.ErrUnknownType) || !strings.Contains(err.Error(), "X, X, Y") {
		t.Errorf("unknown: %v", err)
	}
	// Types with no records yet: a full name, or a built-in type's short
	// name (a live view subscribes before the data comes).
	got, err = stream.ResolveTypes(md, []string{"shop.Order", "BeforeOperationEvent", "SpanRecord"})
	if err != nil || strings.Join(got, " ") != "shop.Order kieker.common.record.flow.trace.operation.BeforeOperationEvent tracebridge.trace.SpanRecord" {
		t.Errorf("types to come: %v %v", got, err)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"10m":                  now.Add(-10 * time.Minute),
		"1d":                   now.Add(-24 * time.Hour),
		"now":                  now,
		"2026-01-01T00:00:00Z": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := stream.ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: %v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5m"} {
		if _, err := stream.ParseTime(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestEndTimeOfAWindowInThePast: a subscriber to a window that ended
// before it started (`tail --since 24h --until now`) gets every record of
// the window, exactly what Dump writes, and then ends, however long it
// takes to read. Its handler holds the first record until the end time
// and the second the end timer allows have passed in wall time, so the
// window is still being read when the timer fires, on any machine.
func TestEndTimeOfAWindowInThePast(t *testing.T) {
	b := bridge(t)
	ctx := context.Background()
	since := time.Now().Add(-time.Second)
	const batches, calls = 40, 3
	for i := range batches {
		b.Consume(ctx, kiekerTrace([]string{"web-1", "web-2"}[i%2], int64(i+1), calls))
	}
	waitStored(t, authURL(b), batches*(1+2*calls))
	until := time.Now()

	s, err := stream.Open(authURL(b), stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Dump(ctx, t.TempDir(), stream.DumpOptions{Since: since, Until: until})
	if err != nil {
		t.Fatal(err)
	}
	want := readLog(t, st.Dir)[1:] // without the dump's metadata record
	if len(want) != batches*(1+2*calls) {
		t.Fatalf("dump wrote %d records, want %d", len(want), batches*(1+2*calls))
	}

	sub, err := stream.Open(authURL(b), stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sub.SetStartTime(since)
	sub.SetEndTime(until)
	var got []record.Record
	sub.OnEvent("", func(e *stream.Event) {
		if len(got) == 0 {
			for !time.Now().After(until.Add(1500 * time.Millisecond)) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		got = append(got, e.Record.Clone())
	})
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := sub.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	if runCtx.Err() != nil {
		t.Fatal("the stream did not end after its window")
	}
	if len(got) != len(want) {
		t.Fatalf("the subscriber got %d records, the dump %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].Equal(&want[i]) {
			t.Fatalf("record %d: got %v, dump %v", i, got[i], want[i])
		}
	}
}

// TestEndTimeWithFilters: a window in the past read through a consumer
// filtered by host or type (`tail --since 1h --until now --host H`) ends
// as an unfiltered one does, with every record of the window its filter
// matches (Dump's of the same window): when the filter matches no record
// (the server moves such a consumer's Delivered.Stream to the
// repository's last sequence though it delivered nothing: the reader,
// which compared it with the last message read, waited for ever), and
// when the records it matches are not the repository's last.
func TestEndTimeWithFilters(t *testing.T) {
	b := bridge(t)
	ctx := context.Background()
	since := time.Now().Add(-time.Second)
	const batches, calls = 10, 2
	for i := range batches { // web-1's, then web-2's: the last messages are web-2's
		host := "web-1"
		if i >= batches/2 {
			host = "web-2"
		}
		b.Consume(ctx, kiekerTrace(host, int64(i+1), calls))
	}
	waitStored(t, authURL(b), batches*(1+2*calls))

	for _, tc := range []struct {
		name         string
		hosts, types []string
		want         int
	}{
		{"host matches nothing", []string{"nosuchhost"}, nil, 0},
		{"type matches nothing", nil, []string{"CPUUtilizationRecord"}, 0},
		{"host matches the first records only", []string{"web-1"}, nil, batches / 2 * (1 + 2*calls)},
		{"type and host match the first records only", []string{"web-1"}, []string{"BeforeOperationEvent"}, batches / 2 * calls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The window ends now: the end timer fires a second later,
			// after the subscriber has read what its filter matches.
			until := time.Now()
			s, err := stream.Open(authURL(b), stream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			md, err := s.Metadata(ctx)
			if err != nil {
				t.Fatal(err)
			}
			types, err := stream.ResolveTypes(md, tc.types) // as tail and dump do
			if err != nil {
				t.Fatal(err)
			}
			dumpCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			st, err := s.Dump(dumpCtx, t.TempDir(), stream.DumpOptions{Since: since, Until: until, Hosts: tc.hosts, Types: types})
			if err != nil {
				t.Fatal(err)
			}
			if dumpCtx.Err() != nil {
				t.Fatal("the dump did not end")
			}
			if st.Records != int64(tc.want)+1 { // + the dump's metadata record
				t.Fatalf("dump wrote %d records, want %d", st.Records-1, tc.want)
			}

			sub, err := stream.Open(authURL(b), stream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			sub.SetStartTime(since)
			sub.SetEndTime(until)
			sub.SetHosts(tc.hosts...)
			got := 0
			count := func(e *stream.Event) {
				if tc.hosts != nil && !slices.Contains(tc.hosts, e.Host) {
					t.Errorf("a record of host %q", e.Host)
				}
				got++
			}
			if len(types) == 0 {
				sub.OnEvent("", count)
			}
			for _, typ := range types {
				sub.OnEvent(typ, count)
			}
			runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := sub.Start(runCtx); err != nil {
				t.Fatal(err)
			}
			if runCtx.Err() != nil {
				t.Fatalf("the stream did not end after its window (%d records read)", got)
			}
			if got != tc.want {
				t.Fatalf("the subscriber got %d records, want %d", got, tc.want)
			}
		})
	}
}

// authURL is the bridge's stream URL with its embedded server's
// credential.
func authURL(b *sink.Sink) string {
	user, pass := b.Credentials()
	return strings.Replace(b.URL(), "://", "://"+url.UserPassword(user, pass).String()+"@", 1)
}
