package jfrhttp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

func TestMain(m *testing.M) {
	code := m.Run()
	multi.Remove()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// multi is a real JVM's recording of several chunks.
var multi = jfrtest.Shared{Options: jfrtest.Options{Seconds: 3, MaxChunkSize: "1M", RunID: "upload"}}

// collector keeps copies of what it consumes; block, when set, holds
// Consume until it is closed.
type collector struct {
	mu      sync.Mutex
	records []record.Record
	origins []record.Origin
	block   chan struct{}
}

func (c *collector) Consume(ctx context.Context, b *record.Batch) error {
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range b.Records {
		c.records = append(c.records, b.Records[i].Clone())
	}
	c.origins = append(c.origins, b.Origin)
	return nil
}

func (c *collector) counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int64{}
	for _, r := range c.records {
		m[r.Type.Name]++
	}
	return m
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.records)
}

// start runs a receiver on a free loopback port until the test ends.
func start(t *testing.T, cfg Config, shared *pipeline.Shared, out pipeline.Consumer) string {
	t.Helper()
	_, url := startReceiver(t, cfg, shared, out)
	return url
}

// startReceiver is start returning the receiver too.
func startReceiver(t *testing.T, cfg Config, shared *pipeline.Shared, out pipeline.Consumer) (*Receiver, string) {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	r, err := New(cfg, pipeline.Settings{Name: "up", Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return r, "http://" + r.Addr().String()
}

// answer is an upload's JSON answer.
type answer struct {
	Error      string
	Chunks     int
	Events     int64
	Duplicates int
	Skipped    int64
	Bytes      int64
	Host       string
	From       int64
	Until      int64
}

func post(t *testing.T, url string, body io.Reader, header ...string) (int, answer, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, a, resp.Header
}

// small is the committed recording of the codec's tests and its jfr
// summary.
func small(t *testing.T) ([]byte, map[string]int64) {
	t.Helper()
	dir := filepath.Join("..", "..", "codec", "jfr", "testdata")
	data, err := os.ReadFile(filepath.Join(dir, "small.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "small.summary"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(sum))
	for sc.Scan() {
		name, n, _ := strings.Cut(sc.Text(), " ")
		if name == "jdk.Metadata" || name == "jdk.CheckPoint" || name == "jdk.Checkpoint" {
			continue
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("summary line %q", sc.Text())
		}
		want[name] = v
	}
	return data, want
}

func gzipped(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// form is a multipart body like the Pyroscope Java agent's: a labels
// part, then the recording as the jfr part.
func form(t *testing.T, data []byte, part string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	lw, _ := mw.CreateFormFile("labels", "labels")
	lw.Write([]byte{0x0a, 0x00})
	fw, _ := mw.CreateFormFile(part, part)
	fw.Write(data)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

func sumTotal(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// TestUploadForms: the committed recording posted raw, gzip (said by the
// header, or only by its magic bytes) and multipart (raw and gzip jfr
// part) gives the events jfr summary counts, as records of the host the
// name gives.
func TestUploadForms(t *testing.T) {
	data, want := small(t)
	form1, ct1 := form(t, data, "jfr")
	form2, ct2 := form(t, gzipped(t, data), "jfr")
	for _, c := range []struct {
		name   string
		body   []byte
		header []string
	}{
		{"raw", data, []string{"Content-Type", "application/octet-stream"}},
		{"gzip header", gzipped(t, data), []string{"Content-Encoding", "gzip"}},
		{"gzip magic", gzipped(t, data), nil},
		{"multipart", form1, []string{"Content-Type", ct1}},
		{"multipart gzip part", form2, []string{"Content-Type", ct2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := &collector{}
			url := start(t, Config{BatchSize: 100}, nil, col)
			code, a, _ := post(t, url+"/ingest?format=jfr&name=shop-1%7Benv%3Dprod%7D&from=1700000000&until=1700000010000", bytes.NewReader(c.body), c.header...)
			if code != 200 {
				t.Fatalf("%d %+v", code, a)
			}
			got := col.counts()
			for name, n := range want {
				if got[name] != n {
					t.Errorf("%s: %d, jfr summary %d", name, got[name], n)
				}
			}
			if int64(col.len()) != sumTotal(want) || a.Events != sumTotal(want) || a.Chunks != 1 || a.Skipped != 0 || a.Bytes != int64(len(data)) {
				t.Errorf("answer %+v, %d records, want %d events of %d bytes", a, col.len(), sumTotal(want), len(data))
			}
			if a.Host != "shop-1" || a.From != 1700000000 || a.Until != 1700000010 {
				t.Errorf("answer %+v", a)
			}
			col.mu.Lock()
			defer col.mu.Unlock()
			for _, o := range col.origins {
				if o.Host != "shop-1" || o.Session == "" || !strings.HasPrefix(o.Peer, "127.0.0.1:") {
					t.Fatalf("origin %+v", o)
				}
			}
		})
	}
}

// TestUploadManyChunks: a real JVM's recording of several chunks gives
// every event jfr summary counts.
func TestUploadManyChunks(t *testing.T) {
	tools, path := multi.Get(t)
	want, chunks, err := tools.Summary(path)
	if err != nil {
		t.Fatal(err)
	}
	delete(want, "jdk.Metadata")
	delete(want, "jdk.CheckPoint")
	delete(want, "jdk.Checkpoint")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	url := start(t, Config{}, nil, col)
	code, a, _ := post(t, url+"/ingest?name=jvm-a", bytes.NewReader(gzipped(t, data)), "Content-Encoding", "gzip")
	if code != 200 || a.Chunks != chunks || chunks < 2 || a.Events != sumTotal(want) {
		t.Fatalf("%d %+v; jfr summary: %d chunks, %d events", code, a, chunks, sumTotal(want))
	}
	got := col.counts()
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d, jfr summary %d", name, got[name], n)
		}
	}
	t.Logf("%d chunks, %d events of %d types", a.Chunks, a.Events, len(want))
}

// TestUploadDuplicates: a host that sends chunks it sent before (a loop
// of jcmd JFR.dump: each dump holds the recording so far) has each event
// handed on once, and the records equal those of one upload of the whole
// recording (a skipped chunk's constants are read: the next chunk may
// refer to them); another host's chunks are its own; an upload that
// fails lets its chunk be sent again; duplicates: keep hands them on.
func TestUploadDuplicates(t *testing.T) {
	tools, path := multi.Get(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, chunks, err := tools.Summary(path)
	if err != nil {
		t.Fatal(err)
	}
	if chunks < 2 {
		t.Fatalf("%d chunks, want 2 or more", chunks)
	}
	// The first chunk: what an earlier dump held.
	h, _, err := (&chunkReader{r: bytes.NewReader(data), max: 1 << 30}).next()
	if err != nil {
		t.Fatal(err)
	}
	one := h.ChunkSize
	whole := &collector{}
	code, a, _ := post(t, start(t, Config{}, nil, whole)+"/ingest?name=jvm", bytes.NewReader(data))
	if code != 200 || a.Duplicates != 0 {
		t.Fatalf("whole: %d %+v", code, a)
	}

	col := &collector{}
	url := start(t, Config{}, nil, col)
	code, first, _ := post(t, url+"/ingest?name=jvm", bytes.NewReader(data[:one]))
	if code != 200 || first.Chunks != 1 || first.Duplicates != 0 {
		t.Fatalf("first dump: %d %+v", code, first)
	}
	code, second, _ := post(t, url+"/ingest?name=jvm", bytes.NewReader(gzipped(t, data)), "Content-Encoding", "gzip")
	if code != 200 || second.Chunks != chunks || second.Duplicates != 1 || first.Events+second.Events != a.Events {
		t.Fatalf("second dump: %d %+v, the first %+v; whole %+v", code, second, first, a)
	}
	col.mu.Lock()
	if len(col.records) != len(whole.records) {
		t.Errorf("%d records, one upload %d", len(col.records), len(whole.records))
	}
	for i := range min(len(col.records), len(whole.records)) {
		if !col.records[i].Equal(&whole.records[i]) {
			t.Fatalf("record %d (%s) differs from one upload's (%s)", i, col.records[i].Type.Name, whole.records[i].Type.Name)
		}
	}
	col.mu.Unlock()
	got := col.counts()
	for name, n := range want {
		if name != "jdk.Metadata" && name != "jdk.CheckPoint" && got[name] != n {
			t.Errorf("%s: %d, jfr summary %d", name, got[name], n)
		}
	}
	if code, a, _ := post(t, url+"/ingest?name=jvm", bytes.NewReader(data)); code != 200 || a.Events != 0 || a.Duplicates != chunks {
		t.Errorf("the same again: %d %+v", code, a)
	}
	if code, a, _ := post(t, url+"/ingest?name=other", bytes.NewReader(data)); code != 200 || a.Events != sumTotal(whole.counts()) || a.Duplicates != 0 {
		t.Errorf("another host: %d %+v", code, a)
	}

	// A chunk cut short is not remembered: sent whole later, it is read.
	fresh := &collector{}
	url = start(t, Config{}, nil, fresh)
	if code, a, _ := post(t, url+"/ingest?name=jvm", bytes.NewReader(data[:one+100])); code != 400 || a.Chunks != 1 {
		t.Fatalf("cut: %d %+v", code, a)
	}
	if code, a, _ := post(t, url+"/ingest?name=jvm", bytes.NewReader(data)); code != 200 || a.Duplicates != 1 || int64(fresh.len()) != sumTotal(whole.counts()) {
		t.Errorf("after the cut upload: %d %+v, %d records", code, a, fresh.len())
	}

	keep := &collector{}
	url = start(t, Config{Duplicates: DuplicatesKeep}, nil, keep)
	post(t, url+"/ingest?name=jvm", bytes.NewReader(data))
	if code, a, _ := post(t, url+"/ingest?name=jvm", bytes.NewReader(data)); code != 200 || a.Duplicates != 0 || int64(keep.len()) != 2*sumTotal(whole.counts()) {
		t.Errorf("duplicates: keep: %d %+v, %d records", code, a, keep.len())
	}
}

// TestUploadBadInput: what is not a whole JFR recording is answered with
// a 4xx naming the reason; the receiver takes the next upload.
func TestUploadBadInput(t *testing.T) {
	data, want := small(t)
	// The uploads below send the same chunk again and again: keep the
	// duplicates, so that the records handed on before each fault count.
	corrupt := bytes.Clone(data)
	copy(corrupt[24:32], []byte{0, 0, 0, 0, 0, 0, 0, 70}) // metadata offset into the events
	second := append(bytes.Clone(data), []byte("FLR\x00garbage after the chunk.................................................")...)
	noJFRPart, ct := form(t, data, "profile")
	col := &collector{}
	url := start(t, Config{MaxChunkSize: 1 << 20, MaxBodySize: 4 << 20, Duplicates: DuplicatesKeep}, nil, col)
	for _, c := range []struct {
		name   string
		query  string
		body   []byte
		header []string
		code   int
		reason string
	}{
		{"not JFR", "name=h", []byte("this is not a flight recording, it is text"), nil, 400, "not a JFR recording"},
		{"empty", "name=h", nil, nil, 400, "empty recording"},
		{"short", "name=h", []byte("FL"), nil, 400, "chunk header ends after 2"},
		{"cut in the header", "name=h", data[:40], nil, 400, "truncated recording: offset 0"},
		{"cut in the chunk", "name=h", data[:len(data)/2], nil, 400, "truncated recording: chunk at offset 0"},
		{"cut gzip", "name=h", gzipped(t, data)[:2000], nil, 400, "truncated"},
		{"bad gzip", "name=h", []byte{0x1f, 0x8b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, nil, 400, "gzip"},
		{"corrupt", "name=h", corrupt, nil, 400, "corrupt recording"},
		{"garbage after a chunk", "name=h", second, nil, 400, "chunk at offset " + strconv.Itoa(len(data))},
		{"no jfr part", "name=h", noJFRPart, []string{"Content-Type", ct}, 400, "no part named jfr"},
		{"no name", "", data, nil, 400, "name missing"},
		{"bad from", "name=h&from=yesterday", data, nil, 400, "from"},
		{"until before from", "name=h&from=20&until=10", data, nil, 400, "before"},
		{"pprof", "name=h&format=pprof", data, nil, 415, "format"},
		{"brotli", "name=h", data, []string{"Content-Encoding", "br"}, 415, "content encoding"},
		{"huge chunk", "name=h", append(data[:8:8], append([]byte{0, 0, 0, 0, 0x10, 0, 0, 0}, data[16:]...)...), nil, 413, "max_chunk_size"},
		{"huge body", "name=h", make([]byte, 5<<20), nil, 413, "max_body_size"},
		{"gzip bomb", "name=h", gzipped(t, bytes.Repeat(data, 20)), nil, 413, "max_body_size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, a, _ := post(t, url+"/ingest?"+c.query, bytes.NewReader(c.body), c.header...)
			if code != c.code || !strings.Contains(a.Error, c.reason) {
				t.Errorf("%d %q, want %d with %q", code, a.Error, c.code, c.reason)
			}
		})
	}
	// The first chunk of "garbage after a chunk" and the chunks of the
	// gzip bomb within max_body_size went on before their error was
	// found.
	if n, whole := int64(col.len()), (4<<20)/int64(len(data)); n != (1+whole)*sumTotal(want) {
		t.Errorf("%d records after the bad uploads, want %d (%d good chunks)", n, (1+whole)*sumTotal(want), 1+whole)
	}
	if code, a, _ := post(t, url+"/ingest?name=h", bytes.NewReader(data)); code != 200 || a.Events != sumTotal(want) {
		t.Errorf("a good upload after the bad ones: %d %+v", code, a)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/ingest"}, {"POST", "/render"}} {
		req, _ := http.NewRequest(c.method, url+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 && resp.StatusCode != 404 {
			t.Errorf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
}

// TestUploadFlood: beyond max_uploads an upload is answered 429 with
// Retry-After; once the first ends, the next is taken.
func TestUploadFlood(t *testing.T) {
	data, want := small(t)
	col := &collector{}
	r, url := startReceiver(t, Config{MaxUploads: 1}, nil, col)
	pr, pw := io.Pipe()
	first := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url+"/ingest?name=slow", pr)
		resp, err := http.DefaultClient.Do(req)
		var a answer
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
		} else {
			a.Error = err.Error()
		}
		first <- a
	}()
	pw.Write(data[:100]) // the first upload holds its slot while it waits for more
	// The client may send what it read from the pipe a moment later (a
	// long one on a busy machine): the next upload is sent once the
	// first holds the slot, or it could take the slot first.
	deadline := time.Now().Add(30 * time.Second)
	for len(r.slots) == 0 {
		select {
		case a := <-first:
			t.Fatalf("the slow upload ended before its body did: %+v", a)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow upload did not reach the receiver within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, a, h := post(t, url+"/ingest?name=quick", bytes.NewReader(data))
	if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(a.Error, "max_uploads") {
		t.Errorf("while an upload is read: %d %+v %v", code, a, h)
	}
	pw.Write(data[100:])
	pw.Close()
	if a := <-first; a.Events != sumTotal(want) {
		t.Errorf("the slow upload: %+v", a)
	}
	if code, a, _ := post(t, url+"/ingest?name=quick", bytes.NewReader(data)); code != 200 {
		t.Errorf("after the slow upload: %d %+v", code, a)
	}
}

// TestUploadBackPressure: a pipeline that takes nothing within
// emit_timeout makes the upload 429.
func TestUploadBackPressure(t *testing.T) {
	data, _ := small(t)
	col := &collector{block: make(chan struct{})}
	url := start(t, Config{EmitTimeout: pipeline.Duration(200 * time.Millisecond)}, nil, col)
	code, a, h := post(t, url+"/ingest?name=h", bytes.NewReader(data))
	close(col.block)
	if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(a.Error, "busy") {
		t.Errorf("%d %+v", code, a)
	}
}

// TestUploadSecurity: with security on, the bearer token of a host of
// the host table decides the host; none or a wrong one is 401; a
// disabled host's upload is read and dropped.
func TestUploadSecurity(t *testing.T) {
	data, want := small(t)
	db, err := hostdb.Open(t.TempDir(), hostdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Add(hostdb.Host{Name: "jvm-7"}, "tok-7"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Add(hostdb.Host{Name: "off", Disabled: true}, "tok-off"); err != nil {
		t.Fatal(err)
	}
	shared := &pipeline.Shared{}
	shared.SetHostDB(db)
	col := &collector{}
	url := start(t, Config{Security: true}, shared, col)
	for _, auth := range []string{"", "Bearer wrong", "Basic dG9rLTc="} {
		code, a, h := post(t, url+"/ingest?name=jvm-7", bytes.NewReader(data), "Authorization", auth)
		if code != 401 || h.Get("WWW-Authenticate") == "" || !strings.Contains(a.Error, "unauthorized") {
			t.Errorf("%q: %d %+v", auth, code, a)
		}
	}
	if code, a, _ := post(t, url+"/ingest?name=else", bytes.NewReader(data), "Authorization", "Bearer tok-off"); code != 200 || a.Events != sumTotal(want) {
		t.Errorf("disabled host: %d %+v", code, a)
	}
	if col.len() != 0 {
		t.Errorf("%d records of refused or disabled hosts", col.len())
	}
	code, a, _ := post(t, url+"/ingest?name=else", bytes.NewReader(data), "Authorization", "Bearer tok-7")
	if code != 200 || a.Host != "jvm-7" || int64(col.len()) != sumTotal(want) {
		t.Fatalf("%d %+v, %d records", code, a, col.len())
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, o := range col.origins {
		if o.Host != "jvm-7" {
			t.Fatalf("origin %+v", o)
		}
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []struct {
		cfg    Config
		reason string
	}{
		{Config{}, "listen address missing"},
		{Config{Listen: "0.0.0.0:4040"}, "not a loopback"},
		{Config{Listen: "127.0.0.1:4040", MaxUploads: -1}, "negative"},
		{Config{Listen: "127.0.0.1:4040", MaxChunkSize: 10}, "smaller than a chunk header"},
		{Config{Listen: "127.0.0.1:4040", TLS: TLS{Cert: "c"}}, "go together"},
		{Config{Listen: "127.0.0.1:4040", Types: []string{"["}}, "types"},
		{Config{Listen: "127.0.0.1:4040", Duplicates: "drop"}, "duplicates"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.reason)
		}
	}
	if err := (&Config{Listen: "0.0.0.0:4040", Insecure: true}).Validate(); err != nil {
		t.Error(err)
	}
}
