package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

var httpLine = regexp.MustCompile(`(?m)^tracebridge: http on (https?://\S+)/ \(API /api/v1, Jaeger /api\)$`)

// httpURL returns the address of the bridge's HTTP listener.
func httpURL(t *testing.T, p *bridgetest.Process) string {
	t.Helper()
	m := httpLine.FindStringSubmatch(p.Stdout())
	if m == nil {
		t.Fatalf("no http line:\n%s", p.Stdout())
	}
	return m[1]
}

// apiGet fetches a URL: its status and body.
func apiGet(t *testing.T, method, url, body, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// runEnv runs the binary with extra environment variables.
func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runIn(t, "", env, args...)
}

// runIn runs the binary in directory dir ("": the test's) with extra
// environment variables.
func runIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bridgetest.Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running tracebridge %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// TestAPIEndToEnd: the real binary with --http: Kieker traces
// (replay) and zorka traces (a zico agent) are found through the REST
// API and Jaeger's API; writes need the token `tracebridge token` made;
// bad parameters are 400s; `query --url` against the running bridge
// prints exactly what `query --store` prints once it has stopped.
func TestAPIEndToEnd(t *testing.T) {
	dir := t.TempDir()
	pair := strings.Split(strings.TrimSpace(ok(t, "token").stdout), "\n")
	if len(pair) != 2 || !strings.HasPrefix(pair[0], "tbt_") || !strings.HasPrefix(pair[1], "$argon2id$") {
		t.Fatalf("tracebridge token: %q", pair)
	}
	token := pair[0]
	writeFile(t, filepath.Join(dir, "tokens"), "# the test's token\n"+pair[1]+"\n")
	cfg := `flush_interval: 100ms
traces: {window: 200ms}
http: {api_tokens_file: tokens}
receivers:
  - {name: kieker, type: kieker-tcp, listen: "127.0.0.1:0"}
  - {name: zico, type: zico, listen: "127.0.0.1:0"}
sinks:
  - {type: kieker-log, path: logs}
  - {type: store, path: store}
`
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, cfg), "--http", "127.0.0.1:0")
	base := httpURL(t, p)

	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	kieker := assembleLog(t, log)
	ok(t, "replay", log, "--to", "kieker-tcp://"+p.Addr("kieker"))
	agent := zicotest.NewAgent(p.Addr("zico"), "zorka-host", "")
	defer agent.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sent []zico.TraceRecord
	for i := range 6 {
		r := zicotest.Generate(rng, 3+i, time.Now().Add(-time.Duration(i)*time.Second))
		sent = append(sent, r)
		if err := agent.Send(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	want := len(kieker) + len(sent)
	var all struct {
		Traces []struct{ Host, TraceID, Name string }
		More   bool
	}
	for i := 0; ; i++ {
		code, b := apiGet(t, "GET", base+"/api/v1/traces?limit=10000", "", "")
		if code != 200 {
			t.Fatalf("search: %d %s", code, b)
		}
		json.Unmarshal(b, &all)
		if len(all.Traces) == want {
			break
		}
		if i > 100 {
			t.Fatalf("%d traces found over the API, want %d", len(all.Traces), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var zorka, kiekerID string
	for _, tr := range all.Traces {
		if tr.Host == "zorka-host" && zorka == "" {
			zorka = tr.TraceID
		}
		if tr.Host != "zorka-host" && kiekerID == "" {
			kiekerID = tr.TraceID
		}
	}

	// Jaeger's API over the same store.
	code, b := apiGet(t, "GET", base+"/api/services", "", "")
	var svcs struct{ Data []string }
	json.Unmarshal(b, &svcs)
	if code != 200 || !slices.Contains(svcs.Data, "zorka-host") || len(svcs.Data) < 2 {
		t.Errorf("services: %d %s", code, b)
	}
	code, b = apiGet(t, "GET", base+"/api/traces?service=zorka-host&start=0&limit=100", "", "")
	var jt struct {
		Data  []struct{ TraceID string }
		Total int
	}
	json.Unmarshal(b, &jt)
	if code != 200 || len(jt.Data) != len(sent) || jt.Total != len(sent) || len(jt.Data[0].TraceID) != 32 {
		t.Errorf("Jaeger search: %d traces, total %d: %.300s", len(jt.Data), jt.Total, b)
	}
	code, b = apiGet(t, "GET", base+"/api/traces/"+jt.Data[0].TraceID, "", "")
	if code != 200 || !bytes.Contains(b, []byte(`"processes":{"p1":{"serviceName":"zorka-host"`)) {
		t.Errorf("Jaeger trace: %d %.300s", code, b)
	}
	if code, _ := apiGet(t, "GET", base+"/api/dependencies", "", ""); code != 200 {
		t.Errorf("dependencies: %d", code)
	}
	// The REST API's views of a trace.
	for _, path := range []string{"/view?maxSpans=2", "/rank", "/flame", "/critical-path", "/spans/0", "/find?q=~."} {
		if code, b := apiGet(t, "GET", base+"/api/v1/traces/"+zorka+path, "", ""); code != 200 {
			t.Errorf("%s: %d %s", path, code, b)
		}
	}
	for _, path := range []string{"/api/v1/analysis/graph?kind=assembly-operation", "/api/v1/analysis/operations", "/api/v1/hosts",
		"/api/v1/receivers", "/api/v1/sinks", "/api/v1/status", "/metrics", "/healthz", "/readyz", "/api/openapi.json",
		"/api/v1/compare?a=" + zorka + "&b=" + kiekerID} {
		if code, b := apiGet(t, "GET", base+path, "", ""); code != 200 {
			t.Errorf("%s: %d %.300s", path, code, b)
		}
	}
	// Bad parameters and unknown ids.
	for _, c := range []struct {
		path string
		code int
	}{
		{"/api/v1/traces?limit=0", 400}, {"/api/v1/traces?since=tomorrow", 400}, {"/api/v1/traces?q=~(", 400},
		{"/api/v1/traces?eql=time+%3E", 400}, {"/api/v1/traces?colour=red", 400}, {"/api/v1/traces/zz", 400},
		{"/api/v1/traces/0123456789abcdef0123456789abcdef", 404}, {"/api/traces/0123456789abcdef0123456789abcdef", 404},
		{"/api/traces?limit=20", 400},
	} {
		if code, b := apiGet(t, "GET", base+c.path, "", ""); code != c.code || !bytes.Contains(b, []byte(`"`)) {
			t.Errorf("%s: %d %s, want %d", c.path, code, b, c.code)
		}
	}
	// Writes need the token.
	host := `{"name":"edge-1","group":"edge","secret":"s3cret"}`
	if code, _ := apiGet(t, "POST", base+"/api/v1/hosts", host, ""); code != 401 {
		t.Errorf("a write without a token: %d", code)
	}
	if code, _ := apiGet(t, "POST", base+"/api/v1/hosts", host, "tbt_wrong"); code != 401 {
		t.Errorf("a write with a wrong token: %d", code)
	}
	if code, b := apiGet(t, "POST", base+"/api/v1/hosts", host, token); code != 201 || bytes.Contains(b, []byte("s3cret")) {
		t.Errorf("a write with the token: %d %s", code, b)
	}
	// The effective configuration: the file's values, and the defaults
	// in effect where it has none (traces: window is the file's).
	if code, b := apiGet(t, "GET", base+"/api/v1/config", "", token); code != 200 || !bytes.Contains(b, []byte("api_tokens_file: tokens")) ||
		!bytes.Contains(b, []byte("queue_batches: 64")) || !bytes.Contains(b, []byte("window: 200ms")) || !bytes.Contains(b, []byte("max_open_traces: 100000")) ||
		!bytes.Contains(b, []byte("shutdown_timeout: 30s")) {
		t.Errorf("config: %d %s", code, b)
	}

	// query --url now, query --store once the bridge has stopped.
	queries := [][]string{
		{}, {"--json"}, {"--limit", "3"}, {"--limit", "3", "--json", "--oldest"},
		{"--host", "zorka-host", "--json"}, {"--errors"}, {"--min-duration", "1ms", "--json"},
		{"--name", sent[0].Marker.TraceType, "--json"}, {"--deep", "~(?i)[a-z]+"}, {"--eql", "time > 1ms", "--deep"},
		{"--pivot", "nothing"}, {"--pivot", "nothing", "--json"},
		{"--trace-id", zorka}, {"--trace-id", zorka, "--json"}, {"--trace-id", kiekerID, "--rank"},
		{"--trace-id", kiekerID, "--rank", "--json"}, {"--trace-id", zorka, "--find", "~.", "--json"},
		{"--trace-id", kiekerID, "--find", "a", "--fields", "methods"},
		{"--trace-id", "0123456789abcdef0123456789abcdef"}, {"~("}, {"--cursor", "nonsense"},
	}
	remote := make([]result, len(queries))
	for i, q := range queries {
		remote[i] = tb(t, append([]string{"query", "--url", base}, q...)...)
	}
	// --store and --url exclude each other.
	if r := tb(t, "query", "--url", base, "--store", "x"); r.code != exitUsage {
		t.Errorf("--url with --store: exit %d", r.code)
	}
	p.Stop()
	for i, q := range queries {
		local := tb(t, append([]string{"query", "--store", filepath.Join(dir, "store")}, q...)...)
		if local.stdout != remote[i].stdout || local.code != remote[i].code || local.stderr != remote[i].stderr {
			t.Errorf("query %v:\n--store (exit %d):\n%s%s\n--url (exit %d):\n%s%s", q, local.code, local.stdout, local.stderr, remote[i].code, remote[i].stdout, remote[i].stderr)
		}
		if i == 0 && strings.Count(local.stdout, "\n") < 10 {
			t.Errorf("query: %s", local.stdout)
		}
	}
}

// TestAPIListenerSecurity: an HTTP listener off loopback without TLS is
// refused (unless insecure: true); with read_token_required, query --url
// needs TRACEBRIDGE_TOKEN.
func TestAPIListenerSecurity(t *testing.T) {
	r := tb(t, "serve", "-t", "tcp-server", "-p", "0", "--data-dir", t.TempDir(), "--http", "0.0.0.0:0")
	if r.code != exitConfig || !strings.Contains(r.stderr, "not a loopback address") || !strings.Contains(r.stderr, "insecure: true") {
		t.Errorf("--http 0.0.0.0:0: exit %d, %s", r.code, r.stderr)
	}
	pair := strings.Split(strings.TrimSpace(ok(t, "token").stdout), "\n")
	p := bridgetest.StartConfig(t, fmt.Sprintf(`http: {listen: "127.0.0.1:0", read_token_required: true, api_tokens: [%q]}
receivers: [{type: kieker-tcp, listen: "127.0.0.1:0"}]
sinks: [{type: store, path: store}]
`, pair[1]))
	base := httpURL(t, p)
	if code, _ := apiGet(t, "GET", base+"/api/v1/traces", "", ""); code != 401 {
		t.Errorf("a read without a token: %d", code)
	}
	if r := tb(t, "query", "--url", base); r.code != exitConfig || !strings.Contains(r.stderr, "TRACEBRIDGE_TOKEN") {
		t.Errorf("query --url without a token: exit %d %s", r.code, r.stderr)
	}
	if r := runEnv(t, []string{"TRACEBRIDGE_TOKEN=" + pair[0]}, "query", "--url", base, "--json"); r.code != 0 || r.stdout != `{"cursor":"","more":false,"partial":false}`+"\n" {
		t.Errorf("query --url with the token: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := tb(t, "query", "--url", "http://127.0.0.1:1"); r.code != exitComm {
		t.Errorf("query --url to nothing: exit %d %s", r.code, r.stderr)
	}
	if r := tb(t, "query", "--url", "ftp://x"); r.code != exitUsage {
		t.Errorf("query --url ftp: exit %d %s", r.code, r.stderr)
	}
	// Tokens are hashed: one with --hash from standard input.
	cmd := exec.Command(bridgetest.Binary(t), "token", "--hash")
	cmd.Stdin = strings.NewReader(pair[0] + "\n")
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "$argon2id$") || strings.Contains(string(out), pair[0]) {
		t.Errorf("token --hash: %q %v", out, err)
	}
}
