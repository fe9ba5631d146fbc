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
)

// zicoAdmitted connects a zico agent: nil when the bridge admitted it,
// the error (an AUTH_ERROR reply) otherwise; an admitted agent sends one
// trace and waits for its OK.
func zicoAdmitted(t *testing.T, addr, host, secret string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := zicotest.NewAgent(addr, host, secret)
	defer a.Close()
	if err := a.Connect(ctx); err != nil {
		var re *zicotest.ReplyError
		if !errors.As(err, &re) || re.Reply != zico.AuthError {
			t.Fatalf("host %s: %v, want admitted or AUTH_ERROR", host, err)
		}
		return err
	}
	r := zicotest.Generate(rand.New(rand.NewPCG(7, 8)), 3, time.Now())
	if err := a.Send(ctx, &r); err != nil {
		t.Fatalf("host %s: send: %v", host, err)
	}
	return nil
}

// hostsJSON lists the host table of data as `hosts list --json` prints it.
func hostsJSON(t *testing.T, data string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for l := range strings.Lines(ok(t, "hosts", "--data-dir", data, "list", "--json").stdout) {
		var h map[string]any
		if err := json.Unmarshal([]byte(l), &h); err != nil {
			t.Fatalf("hosts list: %q: %v", l, err)
		}
		out[h["name"].(string)] = h
	}
	return out
}

// TestSecurityWithoutStore: zico's security and OTLP's bearer tokens work
// without a trace store (a Kieker log the only sink): the host table is
// the bridge's, not the store's. Refused hosts stay out, admitted ones
// get in and their last contact is recorded; no store is made.
func TestSecurityWithoutStore(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "tracebridge-data")
	writeFile(t, filepath.Join(dir, "secret"), "s3cr3t\n")
	writeFile(t, filepath.Join(dir, "token"), "tok-123\n")
	ok(t, "hosts", "--data-dir", data, "add", "good", "--secret-file", filepath.Join(dir, "secret"), "--addr", "127.0.0.1")
	ok(t, "hosts", "--data-dir", data, "add", "shop-1", "--secret-file", filepath.Join(dir, "token"))
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `flush_interval: 100ms
traces: {window: 200ms}
receivers:
  - {name: zico, type: zico, listen: "127.0.0.1:0", security: true}
  - {name: grpc, type: otlp-grpc, listen: "127.0.0.1:0", security: true}
  - {name: http, type: otlp-http, listen: "127.0.0.1:0", security: true}
sinks:
  - {type: kieker-log, path: logs}
`))
	if zicoAdmitted(t, p.Addr("zico"), "unknown", "s3cr3t") == nil {
		t.Error("an unknown host got in")
	}
	if zicoAdmitted(t, p.Addr("zico"), "good", "wrong") == nil {
		t.Error("a wrong secret got in")
	}
	if err := zicoAdmitted(t, p.Addr("zico"), "good", "s3cr3t"); err != nil {
		t.Errorf("the good host: %v", err)
	}
	ctx := context.Background()
	for _, c := range []struct{ grpc, http, token string }{
		{p.Addr("grpc"), "", ""}, {p.Addr("grpc"), "", "wrong"}, {"", p.Addr("http"), ""}, {"", p.Addr("http"), "wrong"},
	} {
		s := newOTLPService(t, "intruder", c.grpc, c.http, c.token, true)
		_, sp := s.tr.Start(ctx, "sneak")
		sp.End()
		if err := s.export(ctx); err == nil || !strings.Contains(strings.ToLower(err.Error()), "unauth") {
			t.Errorf("grpc %q http %q token %q: export %v, want unauthenticated", c.grpc, c.http, c.token, err)
		}
	}
	for _, s := range []*otlpService{newOTLPService(t, "web", p.Addr("grpc"), "", "tok-123", true), newOTLPService(t, "api", "", p.Addr("http"), "tok-123", true)} {
		_, sp := s.tr.Start(ctx, "served")
		sp.End()
		if err := s.export(ctx); err != nil {
			t.Fatalf("export with the host's token: %v", err)
		}
	}
	p.Stop()
	hosts := hostsJSON(t, data)
	if len(hosts) != 2 {
		t.Fatalf("host table: %v", hosts)
	}
	for _, name := range []string{"good", "shop-1"} {
		if lc, _ := hosts[name]["lastContact"].(string); lc == "" || strings.HasPrefix(lc, "0001") {
			t.Errorf("host %s: no last contact: %v", name, hosts[name])
		}
	}
	if _, err := os.Stat(filepath.Join(data, "store")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a store was made: %v", err)
	}
	// What was admitted reached the sink: the zico trace of good.
	if out := ok(t, "traces", filepath.Join(dir, "logs")).stdout; !strings.Contains(out, "good") {
		t.Errorf("the Kieker log lacks the admitted zico trace:\n%.2000s", out)
	}
}

// TestHostTableSurvivesKill: hosts added and secrets changed through the
// running bridge's API, and hosts added with the CLI before, are there
// after a kill -9: the restarted bridge admits them with their secrets
// and refuses the old secret.
func TestHostTableSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "tracebridge-data")
	pair := strings.Split(strings.TrimSpace(ok(t, "token").stdout), "\n")
	token := pair[0]
	writeFile(t, filepath.Join(dir, "tokens"), pair[1]+"\n")
	writeFile(t, filepath.Join(dir, "secret"), "cli-secret\n")
	ok(t, "hosts", "--data-dir", data, "add", "cli-1", "--secret-file", filepath.Join(dir, "secret"))
	cfg := bridgetest.WriteConfig(t, dir, `flush_interval: 100ms
traces: {window: 200ms}
http: {api_tokens_file: tokens}
receivers:
  - {name: zico, type: zico, listen: "127.0.0.1:0", security: true}
sinks:
  - {type: kieker-log, path: logs}
`)
	p := bridgetest.Start(t, dir, "-c", cfg, "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	// While serve runs, the CLI may not change the table.
	if r := tb(t, "hosts", "--data-dir", data, "add", "late"); r.code != exitConfig || !strings.Contains(r.stderr, "/api/v1/hosts") {
		t.Errorf("hosts add while serve runs: exit %d %s", r.code, r.stderr)
	}
	if code, b := apiGet(t, "POST", base+"/api/v1/hosts", `{"name":"edge-1","secret":"s3cret","addr":"127.0.0.1"}`, token); code != 201 {
		t.Fatalf("add: %d %s", code, b)
	}
	if code, b := apiGet(t, "POST", base+"/api/v1/hosts", `{"name":"edge-2","secret":"first"}`, token); code != 201 {
		t.Fatalf("add: %d %s", code, b)
	}
	if code, b := apiGet(t, "PATCH", base+"/api/v1/hosts/edge-2", `{"secret":"second","group":"moved"}`, token); code != 200 {
		t.Fatalf("patch: %d %s", code, b)
	}
	p.Kill()
	p = bridgetest.Start(t, dir, "-c", cfg, "--http", "127.0.0.1:0")
	for _, c := range []struct {
		host, secret string
		in           bool
	}{{"edge-1", "s3cret", true}, {"edge-2", "second", true}, {"edge-2", "first", false}, {"cli-1", "cli-secret", true}, {"late", "", false}} {
		if err := zicoAdmitted(t, p.Addr("zico"), c.host, c.secret); (err == nil) != c.in {
			t.Errorf("host %s with secret %q after the kill: %v, want admitted %v", c.host, c.secret, err, c.in)
		}
	}
	code, b := apiGet(t, "GET", httpURL(t, p)+"/api/v1/hosts/edge-2", "", "")
	if code != 200 || !strings.Contains(string(b), `"group":"moved"`) {
		t.Errorf("edge-2 after the kill: %d %s", code, b)
	}
	p.Stop()
}

// TestLegacyStoreHostsCarriedOver: a trace store written by the version
// that kept the host table in its index (internal/store/testdata) gives
// its hosts to the bridge's host table when serve opens it: their secrets
// admit them (an OTLP bearer token), their traces stay.
func TestLegacyStoreHostsCarriedOver(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "tracebridge-data")
	if err := os.CopyFS(filepath.Join(data, "store"), os.DirFS(filepath.Join("..", "..", "internal", "store", "testdata", "legacy-hosts"))); err != nil {
		t.Fatal(err)
	}
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `flush_interval: 100ms
traces: {window: 300ms}
receivers:
  - {name: grpc, type: otlp-grpc, listen: "127.0.0.1:0", security: true}
sinks:
  - {type: store}
`))
	s := newOTLPService(t, "web", p.Addr("grpc"), "", "tok-123", true)
	_, sp := s.tr.Start(context.Background(), "served")
	sp.End()
	if err := s.export(context.Background()); err != nil {
		t.Fatalf("export with token-host's token of the old store: %v", err)
	}
	p.Stop()
	hosts := hostsJSON(t, data)
	for _, name := range []string{"shop-1", "shop-2", "token-host", "auto-1", "db"} {
		if hosts[name] == nil {
			t.Errorf("host %s not carried over: %v", name, hosts)
		}
	}
	if h := hosts["shop-1"]; h["addr"] != "127.0.0.1" || h["group"] != "shops" || h["secret"] != true || h["maxAge"] != "168h0m0s" {
		t.Errorf("shop-1: %v", h)
	}
	if h := hosts["shop-2"]; h["enabled"] != false {
		t.Errorf("shop-2: %v", h)
	}
	if n, _ := hosts["db"]["size"].(float64); n <= 0 {
		t.Errorf("db's shared bytes: %v", hosts["db"])
	}
	got, _ := queryJSON(t, filepath.Join(dir, "tracebridge-data"))
	if len(got) != 2 {
		t.Errorf("%d traces, want the old one and the new one", len(got))
	}
}
