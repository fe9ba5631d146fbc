package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
)

// The end-to-end proofs of the store with its blocks in S3 (issue 23), on
// the real binary and a real S3 server (versitygw, objstoretest).

// s3StoreYAML is a bridge with a zico and an OTLP/HTTP receiver and a
// store sink whose blocks go to the bucket of c; small heads, cut often,
// so that blocks are uploaded while the test runs. extra is added to the
// sink's settings.
func s3StoreYAML(c objstore.S3Config, extra string) string {
	return fmt.Sprintf(`flush_interval: 100ms
traces: {window: 200ms}
receivers:
  - {name: zico, type: zico, listen: "127.0.0.1:0"}
  - {name: otlp, type: otlp-http, listen: "127.0.0.1:0"}
sinks:
  - type: store
    path: store
    backend: s3
    head_size: 64KiB
    head_age: 1s
    s3: {endpoint: %q, bucket: %q, prefix: %q, access_key_file: %q, secret_key_file: %q, retry_wait: 20ms}
%s`, c.Endpoint, c.Bucket, c.Prefix, c.AccessKeyFile, c.SecretKeyFile, extra)
}

// s3Flags are the query flags that name the bucket store of c.
func s3Flags(c objstore.S3Config) []string {
	return append([]string{"--store", s3URL(c)}, s3Access(c)...)
}

// s3URL is the store location of c (s3://BUCKET/PREFIX).
func s3URL(c objstore.S3Config) string { return "s3://" + c.Bucket + "/" + c.Prefix }

// s3Access are the flags that reach the S3 server of c.
func s3Access(c objstore.S3Config) []string {
	return []string{"--s3-endpoint", c.Endpoint, "--s3-access-key-file", c.AccessKeyFile, "--s3-secret-key-file", c.SecretKeyFile}
}

// reqTrace is a generated zorka trace of n calls whose root carries the
// attribute req=id (how the test finds it again) and pad random hex
// digits (so that traces do not compress to nothing).
func reqTrace(rng *mrand.Rand, id, n, pad int) zico.TraceRecord {
	r := zicotest.Generate(rng, n, time.Now())
	r.Attrs = append(r.Attrs, zico.Attr{Key: "req", Value: zico.Value{Kind: zico.KindString, Str: strconv.Itoa(id)}})
	if pad > 0 {
		b := make([]byte, pad/2)
		rand.Read(b)
		r.Attrs = append(r.Attrs, zico.Attr{Key: "pad", Value: zico.Value{Kind: zico.KindString, Str: hex.EncodeToString(b)}})
	}
	return r
}

// sender is zorka agents sending traces with req ids from a shared
// counter, one try each (a trace whose OK did not come is never sent
// again, so it may be stored at most once); acked holds the req ids
// answered OK.
type sender struct {
	next  atomic.Int64
	mu    sync.Mutex
	acked map[int]bool
	n     atomic.Int64 // len(acked)
}

func newSender() *sender { return &sender{acked: map[int]bool{}} }

// run sends from agents until stop is closed or a send fails; timeout
// bounds each exchange.
func (s *sender) run(addr, host string, seed uint64, pad int, timeout time.Duration, stop <-chan struct{}) {
	agent := zicotest.NewAgent(addr, host, "")
	agent.Retries, agent.Timeout = 1, timeout
	defer agent.Close()
	rng := mrand.New(mrand.NewPCG(seed, 99))
	for {
		select {
		case <-stop:
			return
		default:
		}
		id := int(s.next.Add(1))
		r := reqTrace(rng, id, 4, pad)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := agent.Send(ctx, &r)
		cancel()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.acked[id] = true
		s.mu.Unlock()
		s.n.Add(1)
	}
}

func (s *sender) ackedIDs() map[int]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]bool, len(s.acked))
	for k := range s.acked {
		out[k] = true
	}
	return out
}

// apiTrace is what GET /api/v1/traces/{id} answers, as far as the tests
// look.
type apiTrace struct {
	TraceID string `json:"traceId"`
	Spans   []struct {
		SpanID     string         `json:"spanId"`
		Parent     *string        `json:"parentSpanId"`
		Operation  string         `json:"operation"`
		Attributes map[string]any `json:"attributes"`
	} `json:"spans"`
	Broken []string `json:"broken"`
}

// searchAll lists every trace of the bridge's REST search (one page, no
// more, not partial) and returns the trace ids of its rows in order.
func searchAll(t *testing.T, base, params string) []string {
	t.Helper()
	code, b := apiGet(t, "GET", base+"/api/v1/traces?limit=100000&budget=60s"+params, "", "")
	if code != 200 {
		t.Fatalf("search: %d %s", code, b)
	}
	var page struct {
		Traces []struct {
			TraceID string `json:"traceId"`
		} `json:"traces"`
		More, Partial bool
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("search: %v: %s", err, b)
	}
	if page.More || page.Partial {
		t.Fatalf("search: more %v, partial %v", page.More, page.Partial)
	}
	ids := make([]string, len(page.Traces))
	for i, r := range page.Traces {
		ids[i] = r.TraceID
	}
	return ids
}

func getTrace(t *testing.T, base, id string) apiTrace {
	t.Helper()
	tr, ok := tryTrace(t, base, id)
	if !ok {
		t.Fatalf("GET trace %s: not found", id)
	}
	return tr
}

// tryTrace is getTrace that reports a trace not found (404).
func tryTrace(t *testing.T, base, id string) (apiTrace, bool) {
	t.Helper()
	code, b := apiGet(t, "GET", base+"/api/v1/traces/"+id, "", "")
	if code == http.StatusNotFound {
		return apiTrace{}, false
	}
	if code != 200 {
		t.Fatalf("GET trace %s: %d %s", id, code, b)
	}
	var tr apiTrace
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("GET trace %s: %v: %s", id, err, b)
	}
	return tr, true
}

// checkAcked checks a running bridge's store over its API: every trace
// id once in the search, every span once in its trace, every req id
// acknowledged found, and none twice. It returns the number of traces.
func checkAcked(t *testing.T, base string, acked map[int]bool) int {
	t.Helper()
	ids := searchAll(t, base, "")
	seen := map[string]bool{}
	found := map[int]int{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("trace %s is listed twice by the search", id)
			continue
		}
		seen[id] = true
		tr := getTrace(t, base, id)
		spans := map[string]bool{}
		for _, sp := range tr.Spans {
			if spans[sp.SpanID] {
				t.Errorf("trace %s: span %s twice", id, sp.SpanID)
			}
			spans[sp.SpanID] = true
			if v, ok := sp.Attributes["req"].(string); ok {
				n, _ := strconv.Atoi(v)
				found[n]++
			}
		}
		if len(tr.Broken) > 0 {
			t.Errorf("trace %s broken: %v", id, tr.Broken)
		}
	}
	missing := 0
	for id := range acked {
		if found[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged trace req=%d not found", id)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged traces not found", missing, len(acked))
	}
	for id, n := range found {
		if n > 1 {
			t.Errorf("trace req=%d stored %d times", id, n)
		}
	}
	return len(ids)
}

// TestS3StoreSurvivesKill9: `serve` with its blocks in S3 is killed (-9)
// five times at random moments while zorka agents send traces; after
// each restart it goes on. At the end every trace answered OK is found
// once (each trace id once in the search, each span once in its trace),
// and `store check` of the bucket finds no problem.
func TestS3StoreSurvivesKill9(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "prod/")
	dir := t.TempDir()
	cfg := bridgetest.WriteConfig(t, dir, s3StoreYAML(c, ""))
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 23))
	s := newSender()
	for round := range 5 {
		p := bridgetest.Start(t, dir, "-c", cfg)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		before := s.n.Load()
		for a := range 3 {
			wg.Go(func() {
				s.run(p.Addr("zico"), "kill-host-"+strconv.Itoa(a), uint64(round*10+a), 200, 10*time.Second, stop)
			})
		}
		waitUntil(t, 60*time.Second, "traces acknowledged after a start", func() bool { return s.n.Load() >= before+30 })
		// The random moment: up to 2.5 s more of ingest, so that the
		// kill comes before, during or after a head's cut and upload.
		time.Sleep(time.Duration(rng.IntN(2500)) * time.Millisecond)
		p.Kill()
		close(stop)
		wg.Wait()
		t.Logf("round %d: %d traces acknowledged so far", round, s.n.Load())
	}

	p := bridgetest.Start(t, dir, "-c", cfg, "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	acked := s.ackedIDs()
	n := checkAcked(t, base, acked)
	t.Logf("%d acknowledged, %d traces stored", len(acked), n)
	p.Stop()
	if t.Failed() {
		t.Logf("serve's stderr:\n%s", p.Stderr())
		return
	}
	// Everything is uploaded at a clean stop: the bucket alone holds it.
	r := ok(t, append(append([]string{"store"}, s3Access(c)...), "check", s3URL(c))...)
	if strings.Contains(r.stdout, "problem") || !strings.Contains(r.stdout, "traces") {
		t.Fatalf("store check of the bucket:\n%s%s", r.stdout, r.stderr)
	}
	rows, _ := queryS3(t, c, "")
	if len(rows) != n {
		t.Fatalf("query of the bucket alone: %d traces, the bridge had %d", len(rows), n)
	}
}

// queryS3 runs `query --json` on the bucket store of c (with the
// write-ahead area of wal when not empty) and returns the rows.
func queryS3(t *testing.T, c objstore.S3Config, wal string, args ...string) ([]map[string]any, map[string]any) {
	t.Helper()
	a := append([]string{"query"}, s3Flags(c)...)
	if wal != "" {
		a = append(a, "--wal", wal)
	}
	return parseQueryJSON(t, ok(t, append(append(a, "--json", "--limit", "100000"), args...)...).stdout)
}

func parseQueryJSON(t *testing.T, out string) ([]map[string]any, map[string]any) {
	t.Helper()
	var rows []map[string]any
	var tail map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if _, ok := m["traceId"]; ok {
			rows = append(rows, m)
		} else {
			tail = m
		}
	}
	return rows, tail
}

// TestQueryStoreWhileServeRuns: a second process reads the store while
// `serve` writes it: `query --store DIR` (local blocks) and `query
// --store s3://… --s3-endpoint … --wal DIR` see every trace acknowledged
// (synced) so far, and more as more arrive; without --wal, the bucket
// alone shows the traces uploaded so far, eventually all.
func TestQueryStoreWhileServeRuns(t *testing.T) {
	send := func(t *testing.T, addr, host string, s *sender, n int) {
		t.Helper()
		stop := make(chan struct{})
		done := make(chan struct{})
		want := s.n.Load() + int64(n)
		go func() { defer close(done); s.run(addr, host, uint64(n), 0, 10*time.Second, stop) }()
		waitUntil(t, 60*time.Second, "traces acknowledged", func() bool { return s.n.Load() >= want })
		close(stop)
		<-done
	}
	count := func(rows []map[string]any, host string) int {
		n := 0
		for _, r := range rows {
			if fmt.Sprint(r["host"]) == host {
				n++
			}
		}
		return n
	}
	t.Run("local", func(t *testing.T) {
		p := bridgetest.StartConfig(t, `flush_interval: 100ms
receivers: [{name: zico, type: zico, listen: "127.0.0.1:0"}]
sinks: [{type: store, path: store, head_age: 1s}]
`)
		s := newSender()
		for range 2 {
			send(t, p.Addr("zico"), "reader-host", s, 40)
			want := int(s.n.Load())
			rows, tail := queryJSON(t, p.Dir, "--host", "reader-host")
			if len(rows) < want || tail["partial"] != false {
				t.Fatalf("query --store while serve runs: %d traces, %d acknowledged; %v", len(rows), want, tail)
			}
		}
		p.Stop()
	})
	t.Run("s3", func(t *testing.T) {
		srv := objstoretest.Start(t)
		c := srv.Bucket(t, "traces", "live/")
		dir := t.TempDir()
		p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, s3StoreYAML(c, "")))
		s := newSender()
		for range 2 {
			send(t, p.Addr("zico"), "reader-host", s, 40)
			want := int(s.n.Load())
			rows, tail := queryS3(t, c, filepath.Join(dir, "store"), "--host", "reader-host")
			if count(rows, "reader-host") < want || tail["partial"] != false {
				t.Fatalf("query --store s3://… --wal while serve runs: %d traces, %d acknowledged; %v", len(rows), want, tail)
			}
		}
		// The bucket alone: the heads are cut after head_age (1s) and
		// uploaded; then every trace is there.
		want := int(s.n.Load())
		var got int
		waitUntil(t, 60*time.Second, "the bucket alone shows every trace", func() bool {
			rows, _ := queryS3(t, c, "", "--host", "reader-host")
			got = count(rows, "reader-host")
			return got >= want
		})
		if got != want {
			t.Fatalf("the bucket alone: %d traces, %d sent", got, want)
		}
		p.Stop()
	})
}

// TestS3DownBackPressure: the S3 server stops while traces arrive. The
// bridge keeps answering OK while the write-ahead area has room, then
// back-pressures (no OK; OTLP requests are refused or wait) without
// losing what it acknowledged; the failure is logged once, not per
// trace. When S3 is back the uploads resume and the bucket alone holds
// every acknowledged trace: each zorka trace answered OK, and each OTLP
// request answered 200 (the OTLP receiver takes requests until the
// pipeline's queues are full, then answers 429 with Retry-After).
func TestS3DownBackPressure(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "down/")
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, s3StoreYAML(c, `    max_wal: 128KiB
    sync_interval: 100ms
`)))
	s := newSender()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Agents one after another: each gives up after 3 s without an
		// OK (back-pressure) and the next one connects.
		for i := uint64(0); ; i++ {
			s.run(p.Addr("zico"), "down-host", i, 1000, 3*time.Second, stop)
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	waitUntil(t, 60*time.Second, "traces acknowledged with S3 up", func() bool { return s.n.Load() >= 20 })
	srv.Stop()
	down := s.n.Load()
	// Acknowledged until the write-ahead area is full, then stalled.
	waitUntil(t, 60*time.Second, "the write-ahead area full", func() bool {
		return strings.Contains(p.Stderr(), "write-ahead area is full")
	})
	stalled := s.n.Load()
	if stalled <= down {
		t.Errorf("no trace acknowledged while S3 was down (%d before, %d after)", down, stalled)
	}
	// An OTLP request is not taken either once the pipeline is full: the
	// receiver answers 429 (Retry-After) or the request waits. The
	// pipeline fills later than the zico receiver stalls: OTLP spans wait
	// compact in the assembler and their completed traces in the store
	// sink's queue (bounded: queue_batches entries, maxQueuedSpans
	// spans), then the engine's queue fills.
	otlp := "http://" + p.Addr("otlp") + "/v1/traces"
	client := &http.Client{Timeout: 5 * time.Second}
	refused := false
	var otlpOK []string // the trace ids of the requests answered 200
	until := time.Now().Add(2 * time.Minute)
	for i := 0; !refused && time.Now().Before(until); i++ {
		id := randomTraceID()
		body := otlpJSON("bp-svc", id, []otlpSpan{{id: "00000000000000a1", name: "bp", start: time.Now()}})
		resp, err := client.Post(otlp, "application/json", bytes.NewReader(body))
		if err != nil {
			refused = true // waited past the client's timeout
			t.Logf("OTLP request %d: %v", i, err)
			break
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			otlpOK = append(otlpOK, id)
		}
		refused = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
		if refused {
			t.Logf("OTLP request %d: %s (Retry-After %q)", i, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	if !refused {
		t.Errorf("OTLP requests still succeed with the write-ahead area full")
	}
	if n := s.n.Load(); n > stalled+3 {
		t.Errorf("%d traces acknowledged past a full write-ahead area (%d when it filled)", n, stalled)
	}

	srv.Restart()
	// Uploads resume; acknowledgements go on.
	waitUntil(t, 90*time.Second, "acknowledgements after S3 returned", func() bool { return s.n.Load() >= stalled+20 })
	close(stop)
	<-done
	acked := s.ackedIDs()
	waitUntil(t, 90*time.Second, "every acknowledged trace in the bucket", func() bool {
		rows, _ := queryS3(t, c, "", "--host", "down-host")
		return len(rows) >= len(acked)
	})
	errLog := p.Stderr()
	p.Stop()
	failures := strings.Count(errLog, "block upload failed")
	full := strings.Count(errLog, "write-ahead area is full")
	t.Logf("acknowledged: %d before S3 stopped, %d when the write-ahead area filled, %d in all; logged %d upload failures, %d full write-ahead areas",
		down, stalled, len(acked), failures, full)
	if failures < 1 || failures > 10 || full > 10 {
		t.Errorf("logged %d upload failures and %d full write-ahead areas for %d traces; want the failure named once, not per trace:\n%s",
			failures, full, len(acked), errLog)
	}
	checkBucket(t, c, acked, otlpOK)
}

// checkBucket checks, with a bridge started on a fresh directory over the
// bucket alone, that every acknowledged req id is there once, and every
// trace of ids (OTLP requests answered 200).
func checkBucket(t *testing.T, c objstore.S3Config, acked map[int]bool, ids []string) {
	t.Helper()
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, s3StoreYAML(c, "")), "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	checkAcked(t, base, acked)
	for _, id := range ids {
		if tr, ok := tryTrace(t, base, id); !ok || len(tr.Spans) != 1 {
			t.Errorf("OTLP trace %s, answered 200, not found after S3 returned (%d spans)", id, len(tr.Spans))
		}
	}
	p.Stop()
}

// otlpSpan is one span of a raw OTLP/JSON request.
type otlpSpan struct {
	id, parent, name string
	start            time.Time
}

func randomTraceID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// otlpJSON is an OTLP/HTTP JSON request of spans of one trace of service.
func otlpJSON(service, traceID string, spans []otlpSpan) []byte {
	type kv struct {
		Key   string            `json:"key"`
		Value map[string]string `json:"value"`
	}
	var out []map[string]any
	for _, s := range spans {
		out = append(out, map[string]any{
			"traceId": traceID, "spanId": s.id, "parentSpanId": s.parent, "name": s.name, "kind": 2,
			"startTimeUnixNano": strconv.FormatInt(s.start.UnixNano(), 10),
			"endTimeUnixNano":   strconv.FormatInt(s.start.Add(time.Millisecond).UnixNano(), 10),
		})
	}
	b, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{
		"resource": map[string]any{"attributes": []kv{
			{"service.name", map[string]string{"stringValue": service}},
			{"host.name", map[string]string{"stringValue": service + "-host"}}}},
		"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "tracebridge-test"}, "spans": out}},
	}}})
	return b
}

// postOTLP sends spans and fails the test unless the bridge answers 200.
func postOTLP(t *testing.T, addr string, body []byte) {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/v1/traces", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("OTLP request: %s", resp.Status)
	}
}

// TestTracePartsThreeWindowsApart: the spans of one trace arrive in three
// requests, each three trace windows after the one before, so that the
// bridge stores three parts (the first already in a block of the
// bucket). The REST search and Jaeger's list it once; GET by id (REST and
// Jaeger) returns every span, not broken; so does the bucket after a
// restart.
func TestTracePartsThreeWindowsApart(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "parts/")
	dir := t.TempDir()
	cfg := bridgetest.WriteConfig(t, dir, strings.Replace(s3StoreYAML(c, ""), "window: 200ms", "window: 300ms", 1))
	p := bridgetest.Start(t, dir, "-c", cfg, "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	const window = 300 * time.Millisecond
	id := randomTraceID()
	t0 := time.Now().Add(-time.Second)
	parts := [][]otlpSpan{
		{{id: "0000000000000001", name: "GET /order", start: t0}, {id: "0000000000000002", parent: "0000000000000001", name: "load", start: t0}},
		{{id: "0000000000000003", parent: "0000000000000001", name: "pay", start: t0.Add(time.Millisecond)}},
		{{id: "0000000000000004", parent: "0000000000000003", name: "charge", start: t0.Add(2 * time.Millisecond)},
			{id: "0000000000000005", parent: "0000000000000001", name: "ship", start: t0.Add(3 * time.Millisecond)}},
	}
	spans := 0
	for i, part := range parts {
		sent := time.Now()
		postOTLP(t, p.Addr("otlp"), otlpJSON("orders", id, part))
		spans += len(part)
		// The part is stored (its window passed) …
		waitUntil(t, 30*time.Second, fmt.Sprintf("part %d stored", i), func() bool {
			tr, _ := tryTrace(t, base, id)
			return len(tr.Spans) == spans
		})
		// … and three windows passed since it was sent.
		for time.Since(sent) < 3*window {
			time.Sleep(20 * time.Millisecond)
		}
		if i == 0 {
			// The first part's head is cut (head_age 1s) and uploaded.
			waitUntil(t, 60*time.Second, "the first part in the bucket", func() bool {
				rows, _ := queryS3(t, c, "", "--host", "orders-host")
				return len(rows) == 1
			})
		}
	}
	check := func(t *testing.T, base string) {
		t.Helper()
		rows := 0
		for _, r := range searchAll(t, base, "&service=orders") {
			if r == id {
				rows++
			}
		}
		if rows != 1 {
			t.Errorf("REST search: %d rows of trace %s, want 1", rows, id)
		}
		tr := getTrace(t, base, id)
		got := map[string]bool{}
		for _, sp := range tr.Spans {
			got[sp.SpanID] = true
		}
		if len(tr.Spans) != 5 || len(got) != 5 || len(tr.Broken) != 0 {
			t.Errorf("REST GET: %d spans (%d distinct), broken %v; want the 5 sent, not broken", len(tr.Spans), len(got), tr.Broken)
		}
		var list struct {
			Data []struct {
				TraceID string `json:"traceID"`
				Spans   []struct {
					SpanID string `json:"spanID"`
				} `json:"spans"`
				Warnings []string `json:"warnings"`
			} `json:"data"`
		}
		code, b := apiGet(t, "GET", base+"/api/traces?service=orders&limit=100&lookback=1h", "", "")
		if code != 200 || json.Unmarshal(b, &list) != nil {
			t.Fatalf("Jaeger search: %d %s", code, b)
		}
		rows = 0
		for _, d := range list.Data {
			if d.TraceID == id {
				rows++
			}
		}
		if rows != 1 {
			t.Errorf("Jaeger search: %d rows of trace %s, want 1: %s", rows, id, b)
		}
		code, b = apiGet(t, "GET", base+"/api/traces/"+id, "", "")
		if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Data) != 1 {
			t.Fatalf("Jaeger GET: %d %s", code, b)
		}
		if d := list.Data[0]; len(d.Spans) != 5 || len(d.Warnings) != 0 {
			t.Errorf("Jaeger GET: %d spans, warnings %v; want 5, none: %s", len(d.Spans), d.Warnings, b)
		}
	}
	check(t, base)
	p.Stop()
	// A clean stop leaves the newest parts in the write-ahead area; the
	// next start cuts and uploads them: the same answers from it, and
	// then from the bucket alone.
	p2 := bridgetest.Start(t, dir, "-c", cfg, "--http", "127.0.0.1:0")
	check(t, httpURL(t, p2))
	var rows []map[string]any
	waitUntil(t, 60*time.Second, "every part in the bucket", func() bool {
		rows, _ = queryS3(t, c, "", "--host", "orders-host")
		return len(rows) == 1 && fmt.Sprint(rows[0]["spans"]) == "5"
	})
	p2.Stop()
	r := ok(t, append(append([]string{"query"}, s3Flags(c)...), "--trace-id", id, "--json")...)
	var whole apiTrace
	if err := json.Unmarshal([]byte(r.stdout), &whole); err != nil || len(whole.Spans) != 5 || len(whole.Broken) != 0 {
		t.Fatalf("the bucket alone, by id: %v; %d spans, broken %v:\n%s", err, len(whole.Spans), whole.Broken, r.stdout)
	}
}

// TestS3DownEvictedHeadsSearchable: with S3 stopped, the cut heads wait
// for their uploads and, past twice head_size of index in memory, the
// oldest heads' indexes leave memory for their write-ahead files (the
// real binary says so once); OTLP traces are still taken, and every one
// of them is found through the HTTP API while S3 is down, those of the
// evicted heads read back from their files. Once S3 is back every trace
// reaches the bucket.
func TestS3DownEvictedHeadsSearchable(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "evict/")
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, s3StoreYAML(c, `    max_wal: 16MiB
`)), "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	srv.Stop()
	otlp := p.Addr("otlp")
	var ids []string
	const evicted = "leave memory for their write-ahead files"
	start := time.Now()
	for i := 0; len(ids) < 200 || !strings.Contains(p.Stderr(), evicted); i++ {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("after %d traces in %v, no cut head's index left memory:\n%s", len(ids), time.Since(start), p.Stderr())
		}
		id := randomTraceID()
		spans := make([]otlpSpan, 8)
		for j := range spans {
			spans[j] = otlpSpan{id: fmt.Sprintf("%016x", j+1), name: "op-" + strconv.Itoa(j), start: time.Now()}
			if j > 0 {
				spans[j].parent = spans[0].id
			}
		}
		postOTLP(t, otlp, otlpJSON("evict-svc", id, spans))
		ids = append(ids, id)
	}
	if strings.Contains(p.Stderr(), "write-ahead area is full") {
		t.Errorf("the write-ahead area filled; this test wants the index bound first")
	}
	t.Logf("S3 down: %d traces taken in %v, cut heads' indexes evicted", len(ids), time.Since(start))
	// Every trace, also the oldest (their heads evicted first), is found
	// while S3 is down: once the trace window has closed on the last.
	waitUntil(t, 30*time.Second, "the last trace stored", func() bool {
		_, ok := tryTrace(t, base, ids[len(ids)-1])
		return ok
	})
	for i, id := range ids {
		if tr, ok := tryTrace(t, base, id); !ok || len(tr.Spans) != 8 {
			t.Fatalf("trace %d of %d (%s), S3 down: found %v, %d spans", i, len(ids), id, ok, len(tr.Spans))
		}
	}

	srv.Restart()
	waitUntil(t, 90*time.Second, "every trace in the bucket", func() bool {
		rows, _ := queryS3(t, c, "", "--host", "evict-svc-host")
		return len(rows) >= len(ids)
	})
	p.Stop()
	// A bridge on a fresh directory over the bucket alone finds them all.
	fresh := t.TempDir()
	q := bridgetest.Start(t, fresh, "-c", bridgetest.WriteConfig(t, fresh, s3StoreYAML(c, "")), "--http", "127.0.0.1:0")
	base = httpURL(t, q)
	for i, id := range ids {
		if tr, ok := tryTrace(t, base, id); !ok || len(tr.Spans) != 8 {
			t.Fatalf("trace %d of %d (%s), from the bucket: found %v, %d spans", i, len(ids), id, ok, len(tr.Spans))
		}
	}
	q.Stop()
}
