package main

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// storeConfig is a bridge with a Kieker TCP and a zico receiver and a trace
// store (plus a Kieker log, so the harness knows the bridge's data dir).
func storeConfig(extra string) string {
	return `flush_interval: 100ms
traces: {window: 200ms}
receivers:
  - {name: kieker, type: kieker-tcp, listen: "127.0.0.1:0"}
  - {name: zico, type: zico, listen: "127.0.0.1:0"` + extra + `}
sinks:
  - {type: kieker-log, path: logs}
  - {type: store, path: store}
`
}

// queryJSON runs `tracebridge query --json` and returns the traces and the
// trailer.
func queryJSON(t *testing.T, dir string, args ...string) ([]map[string]any, map[string]any) {
	t.Helper()
	r := ok(t, append([]string{"query", "--store", filepath.Join(dir, "store"), "--json", "--limit", "10000"}, args...)...)
	var out []map[string]any
	var tail map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if _, ok := m["traceId"]; ok {
			out = append(out, m)
		} else {
			tail = m
		}
	}
	return out, tail
}

// TestStoreKeepsTracesOfEverySource: Kieker events and zorka traces reach
// the trace store; queries with filters select exactly the traces a
// computation over the sent data selects.
func TestStoreKeepsTracesOfEverySource(t *testing.T) {
	p := bridgetest.StartConfig(t, storeConfig(""))
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	ok(t, "replay", log, "--to", "kieker-tcp://"+p.Addr("kieker"))
	agent := zicotest.NewAgent(p.Addr("zico"), "zorka-host", "")
	defer agent.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	var sent []zico.TraceRecord
	for i := range 5 {
		r := zicotest.Generate(rng, 3+i, clock.Add(time.Duration(i)*time.Second))
		sent = append(sent, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range sent {
		if err := agent.Send(ctx, &sent[i]); err != nil {
			t.Fatalf("zico send: %v", err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the Kieker traces' window
	p.Stop()

	// The independent view: the log's traces assembled straight from the
	// files, and what the agent sent.
	want := map[string]*trace.Trace{}
	for _, tr := range assembleLog(t, log) {
		want[tr.ID.String()] = tr
	}
	all, tail := queryJSON(t, p.Dir)
	if len(all) != len(want)+len(sent) || tail["more"] != false || tail["partial"] != false {
		t.Fatalf("%d traces in the store, want %d Kieker and %d zorka; %v", len(all), len(want), len(sent), tail)
	}
	hosts, _ := queryJSON(t, p.Dir, "--host", "zorka-host")
	if len(hosts) != len(sent) {
		t.Fatalf("--host zorka-host: %d traces, want %d", len(hosts), len(sent))
	}
	wantErr := 0
	for _, tr := range want {
		if tr.Errors() > 0 {
			wantErr++
		}
	}
	for _, r := range sent {
		if r.Errors > 0 {
			wantErr++
		}
	}
	errs, _ := queryJSON(t, p.Dir, "--errors")
	if len(errs) != wantErr {
		t.Fatalf("--errors: %d traces, want %d", len(errs), wantErr)
	}
	var slow int
	for _, tr := range want {
		if tr.Duration() >= int64(time.Millisecond) {
			slow++
		}
	}
	for _, r := range sent {
		if r.Time >= int64(time.Millisecond) {
			slow++
		}
	}
	got, _ := queryJSON(t, p.Dir, "--min-duration", "1ms")
	if len(got) != slow {
		t.Fatalf("--min-duration 1ms: %d traces, want %d", len(got), slow)
	}
	name := sent[0].Marker.TraceType // a zorka trace's name is its type
	wantName := 0
	for _, r := range sent {
		if r.Marker.TraceType == name {
			wantName++
		}
	}
	got, _ = queryJSON(t, p.Dir, "--name", name)
	if len(got) != wantName {
		t.Fatalf("--name %s: %d traces, want %d", name, len(got), wantName)
	}
	// A trace's tree comes back as `traces --json` prints it.
	for _, line := range strings.Split(strings.TrimSpace(ok(t, "traces", "--json", log).stdout), "\n")[:3] {
		var m struct {
			TraceID string `json:"traceId"`
		}
		json.Unmarshal([]byte(line), &m)
		r := ok(t, "query", "--store", filepath.Join(p.Dir, "store"), "--trace-id", m.TraceID, "--json")
		if strings.TrimSpace(r.stdout) != line {
			t.Fatalf("trace %s from the store:\n%s\nassembled from the log:\n%s", m.TraceID, r.stdout, line)
		}
	}
	if r := ok(t, "store", "check", filepath.Join(p.Dir, "store")); !strings.Contains(r.stdout, "traces") || strings.Contains(r.stdout, "problem") {
		t.Fatalf("store check: %s", r.stdout)
	}
}

// assembleLog assembles a log's traces directly from its files.
func assembleLog(t *testing.T, dir string) []*trace.Trace {
	t.Helper()
	r := ok(t, "traces", "--json", dir)
	var out []*trace.Trace
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m struct {
			TraceID string `json:"traceId"`
		}
		json.Unmarshal([]byte(line), &m)
		id, err := trace.ParseID(m.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		tr := parseTraceJSON(t, line)
		tr.ID = id
		out = append(out, tr)
	}
	return out
}

// parseTraceJSON reads back what trace.AppendJSON wrote, enough to compare.
func parseTraceJSON(t *testing.T, line string) *trace.Trace {
	t.Helper()
	var m struct {
		Spans []struct {
			Start, End int64
			Error      bool
		}
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	tr := &trace.Trace{}
	for _, s := range m.Spans {
		tr.Spans = append(tr.Spans, trace.Span{Start: s.Start, End: s.End, Error: s.Error, Parent: -1})
	}
	return tr
}

// TestStoreSurvivesKill9: traces synced before a kill -9 are found after
// it, by a query and by a bridge started again on the store.
func TestStoreSurvivesKill9(t *testing.T) {
	p := bridgetest.StartConfig(t, storeConfig(""))
	agent := zicotest.NewAgent(p.Addr("zico"), "crashy", "")
	defer agent.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 40
	for range n {
		r := zicotest.Generate(rng, 5, time.Now())
		// An OK means stored: the receiver answers after the store synced.
		if err := agent.Send(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	p.Kill()
	got, _ := queryJSON(t, p.Dir, "--host", "crashy")
	if len(got) != n {
		t.Fatalf("%d of the %d acknowledged traces found after kill -9", len(got), n)
	}
	// serve opens the store again, recovers, and goes on.
	p2 := bridgetest.Start(t, p.Dir, "-c", filepath.Join(p.Dir, "tracebridge.yaml"))
	agent2 := zicotest.NewAgent(p2.Addr("zico"), "crashy", "")
	defer agent2.Close()
	r := zicotest.Generate(rng, 5, time.Now())
	if err := agent2.Send(ctx, &r); err != nil {
		t.Fatal(err)
	}
	p2.Stop()
	if got, _ := queryJSON(t, p.Dir, "--host", "crashy"); len(got) != n+1 {
		t.Fatalf("%d traces after the restart, want %d", len(got), n+1)
	}
}

// TestZicoSecurity: with security on, an unknown host, a wrong secret and
// a wrong address are refused; the right ones get in; the secret is
// stored hashed.
func TestZicoSecurity(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s3cr3t\n"), 0o600)
	// serve's data directory: ./tracebridge-data of its working directory.
	data := filepath.Join(dir, "tracebridge-data")
	ok(t, "hosts", "--data-dir", data, "add", "good", "--secret-file", secret, "--addr", "127.0.0.1", "--group", "prod")
	ok(t, "hosts", "--data-dir", data, "add", "elsewhere", "--secret-file", secret, "--addr", "10.9.9.9")
	raw, err := os.ReadFile(filepath.Join(data, "hosts", "hosts.log"))
	if err != nil || strings.Contains(string(raw), "s3cr3t") || !strings.Contains(string(raw), "argon2id") {
		t.Fatalf("the host table holds the secret in plain text, or no hash (%v):\n%s", err, raw)
	}
	list := ok(t, "hosts", "--data-dir", data, "list", "--json").stdout
	if strings.Contains(list, "s3cr3t") || strings.Contains(list, "argon2") || !strings.Contains(list, `"secret":true`) {
		t.Fatalf("hosts list: %s", list)
	}
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, storeConfig(", security: true")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refused := func(host, auth string) {
		t.Helper()
		a := zicotest.NewAgent(p.Addr("zico"), host, auth)
		defer a.Close()
		var re *zicotest.ReplyError
		if err := a.Connect(ctx); !errors.As(err, &re) || re.Reply != zico.AuthError {
			t.Errorf("host %s with secret %q: %v, want AUTH_ERROR", host, auth, err)
		}
	}
	refused("unknown", "s3cr3t")
	refused("good", "wrong")
	refused("elsewhere", "s3cr3t")
	a := zicotest.NewAgent(p.Addr("zico"), "good", "s3cr3t")
	defer a.Close()
	r := zicotest.Generate(rand.New(rand.NewPCG(5, 6)), 4, time.Now())
	if err := a.Send(ctx, &r); err != nil {
		t.Fatalf("good host: %v", err)
	}
	p.Stop()
	if got, _ := queryJSON(t, dir, "--host", "good"); len(got) != 1 {
		t.Fatalf("%d traces of the good host", len(got))
	}
}
