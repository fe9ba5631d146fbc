package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/jfrview"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/store"
)

// TestWhoMayDoWhat: reads need no token on loopback, a token from
// elsewhere (and from loopback with read_token_required); writes always
// need a token, from the API's own origin; health needs nothing; the
// configuration (it holds passwords) needs a token to be read.
func TestWhoMayDoWhat(t *testing.T) {
	tok, _ := testToken()
	bearer := "Bearer " + tok
	e := newEnv(t, nil, shop(2, time.Now().Add(-time.Hour))...)
	strict := newEnv(t, func(o *Options) { o.ReadTokenRequired = true })
	noTokens := newEnv(t, func(o *Options) { o.Tokens = nil })
	const local, remote = "127.0.0.1:40000", "192.0.2.10:40000"
	body := `{"name":"h1"}`
	for _, c := range []struct {
		name         string
		e            *env
		method, path string
		from         string
		hdr          []string
		want         int
	}{
		{"read on loopback", e, "GET", "/api/v1/traces", local, nil, 200},
		{"read on IPv6 loopback", e, "GET", "/api/v1/traces", "[::1]:40000", nil, 200},
		{"Jaeger read on loopback", e, "GET", "/api/services", local, nil, 200},
		{"read from the network", e, "GET", "/api/v1/traces", remote, nil, 401},
		{"Jaeger read from the network", e, "GET", "/api/services", remote, nil, 401},
		{"metrics from the network", e, "GET", "/metrics", remote, nil, 401},
		{"read from the network with a token", e, "GET", "/api/v1/traces", remote, []string{"Authorization", bearer}, 200},
		{"read with a wrong token", e, "GET", "/api/v1/traces", local, []string{"Authorization", "Bearer tbt_wrong"}, 401},
		{"read with a malformed header", e, "GET", "/api/v1/traces", local, []string{"Authorization", "Basic dXNlcjpwdw=="}, 401},
		{"health from the network", e, "GET", "/healthz", remote, nil, 200},
		{"OpenAPI from the network", e, "GET", "/api/openapi.json", remote, nil, 200},
		{"read_token_required: loopback", strict, "GET", "/api/v1/traces", local, nil, 401},
		{"read_token_required: with a token", strict, "GET", "/api/v1/traces", local, []string{"Authorization", bearer}, 200},
		{"configuration without a token", e, "GET", "/api/v1/config", local, nil, 401},
		{"write without a token", e, "POST", "/api/v1/hosts", local, nil, 401},
		{"write with a wrong token", e, "DELETE", "/api/v1/hosts/x", local, []string{"Authorization", "Bearer nope"}, 401},
		{"write from another origin", e, "POST", "/api/v1/hosts", local, []string{"Authorization", bearer, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403},
		{"write from another origin (Origin only)", e, "POST", "/api/v1/hosts", local, []string{"Authorization", bearer, "Origin", "http://evil.example"}, 403},
		{"write from the same origin", e, "POST", "/api/v1/hosts", local, []string{"Authorization", bearer, "Origin", "http://example.com", "Sec-Fetch-Site", "same-origin"}, 201},
		{"write from a tool", e, "POST", "/api/v1/hosts", remote, []string{"Authorization", bearer}, 409},
		{"write without configured tokens", noTokens, "POST", "/api/v1/hosts", local, nil, 403},
		{"state-changing GET does not exist", e, "GET", "/api/v1/receivers/x/stop", local, nil, 405},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(body))
		req.RemoteAddr = c.from
		for i := 0; i+1 < len(c.hdr); i += 2 {
			req.Header.Set(c.hdr[i], c.hdr[i+1])
		}
		w := httptest.NewRecorder()
		c.e.api.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.want)
		}
		if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
	}
}

// TestTokens: only argon2id hashes are accepted in the configuration, a
// file of them is read with comments, a token is checked against them
// (and remembered).
func TestTokens(t *testing.T) {
	tok, hash := NewToken()
	if !strings.HasPrefix(tok, "tbt_") || len(tok) < 40 || !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("token %q, hash %q", tok, hash)
	}
	if _, err := NewTokens([]string{tok}); err == nil || !strings.Contains(err.Error(), "not an argon2id hash") {
		t.Errorf("a plain token in the configuration: %v", err)
	}
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("# the CI's token\n\n"+hash+"\n"), 0o600)
	ts, err := LoadTokens(nil, file)
	if err != nil || ts.Len() != 1 {
		t.Fatalf("LoadTokens: %v, %d", err, ts.Len())
	}
	if _, err := LoadTokens(nil, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing tokens file is not an error")
	}
	start := time.Now()
	if ok, err := ts.Check(tok); !ok || err != nil {
		t.Fatalf("Check: %v %v", ok, err)
	}
	first := time.Since(start)
	start = time.Now()
	ts.Check(tok)
	if again := time.Since(start); again > first/10 && again > time.Millisecond {
		t.Errorf("a verified token is checked again in %v (first %v)", again, first)
	}
	if ok, _ := ts.Check(tok + "x"); ok {
		t.Error("a wrong token passes")
	}
	if ok, _ := (*Tokens)(nil).Check(tok); ok {
		t.Error("nil tokens accept")
	}
}

// TestCheckListen: a listener off loopback needs TLS or insecure.
func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr            string
		tls, insecure   bool
		wantErr, reason string
	}{
		{"127.0.0.1:16686", false, false, "", ""},
		{"[::1]:16686", false, false, "", ""},
		{"localhost:16686", false, false, "", ""},
		{":16686", false, false, "every interface", ""},
		{"0.0.0.0:16686", false, false, "0.0.0.0 is not a loopback address", ""},
		{"192.0.2.1:16686", false, false, "tls", ""},
		{"0.0.0.0:16686", true, false, "", ""},
		{"0.0.0.0:16686", false, true, "", ""},
		{"nonsense", false, false, "listen", ""},
	} {
		err := CheckListen(c.addr, c.tls, c.insecure)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s tls=%v insecure=%v: %v, want %q", c.addr, c.tls, c.insecure, err, c.wantErr)
		}
	}
}

// TestHosts: hosts are listed with their size and rate, added, changed,
// disabled and deleted; secrets are stored hashed and never shown.
func TestHosts(t *testing.T) {
	now := time.Now()
	recent := shop(30, now.Add(-30*time.Second))
	e := newEnv(t, nil, recent...)
	code, b := e.write("POST", "/api/v1/hosts", `{"name":"edge-1","addr":"192.0.2.7","secret":"s3cret","group":"edge","comment":"rack 4","maxSize":"2GiB","maxAge":"7d"}`)
	if code != http.StatusCreated {
		t.Fatalf("add: %d %s", code, b)
	}
	var h HostInfo
	json.Unmarshal(b, &h)
	if h.Name != "edge-1" || h.Addr != "192.0.2.7" || !h.Secret || h.Group != "edge" || h.MaxSize != 2<<30 || h.MaxAgeNs != int64(7*24*time.Hour) || !h.Enabled {
		t.Errorf("added %+v", h)
	}
	if strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "argon2") {
		t.Errorf("the answer shows the secret: %s", b)
	}
	rec, _ := e.hosts.Host("edge-1")
	if !hostauth.CheckSecret(rec.Secret, "s3cret") {
		t.Error("the secret is not stored as its hash")
	}
	for _, bad := range []struct{ method, path, body, mention string }{
		{"POST", "/api/v1/hosts", `{"name":"edge-1"}`, "exists"},
		{"POST", "/api/v1/hosts", `{}`, "name"},
		{"POST", "/api/v1/hosts", `{"name":"x","addr":"not-an-ip"}`, "addr"},
		{"POST", "/api/v1/hosts", `{"name":"x","maxSize":"lots"}`, "maxSize"},
		{"POST", "/api/v1/hosts", `{"name":"x","maxAge":-5}`, "maxAge"},
		{"POST", "/api/v1/hosts", `{"name":"x","colour":"red"}`, "colour"},
		{"POST", "/api/v1/hosts", `{"name":"x\u0000"}`, "control"},
		{"POST", "/api/v1/hosts", `{"name":"x"} {}`, "more than one"},
		{"POST", "/api/v1/hosts", `[`, "body"},
		{"PATCH", "/api/v1/hosts/edge-1", `{"name":"edge-2"}`, "renamed"},
		{"PATCH", "/api/v1/hosts/nobody", `{"group":"x"}`, "no such host"},
		{"DELETE", "/api/v1/hosts/nobody", ``, "no such host"},
	} {
		code, b := e.write(bad.method, bad.path, bad.body)
		if code < 400 || code >= 500 || !strings.Contains(string(b), bad.mention) {
			t.Errorf("%s %s %s: %d %s; want a 4xx mentioning %q", bad.method, bad.path, bad.body, code, b, bad.mention)
		}
	}
	code, b = e.write("PATCH", "/api/v1/hosts/edge-1", `{"enabled":false,"group":"core","secret":"","maxAge":3600000000000}`)
	json.Unmarshal(b, &h)
	if code != 200 || h.Enabled || h.Group != "core" || h.Secret || h.MaxAgeNs != int64(time.Hour) || h.Comment != "rack 4" {
		t.Errorf("patch: %d %+v", code, h)
	}
	var list HostList
	e.get("/api/v1/hosts", &list)
	byName := map[string]HostInfo{}
	for _, h := range list.Hosts {
		byName[h.Name] = h
	}
	if len(list.Hosts) != 6 || byName["host-0"].Size == 0 || byName["host-0"].LastContact == nil || byName["host-0"].TracesPerSecond < 0.4 ||
		byName["edge-1"].TracesPerSecond != 0 || len(list.Groups) != 1 || list.Groups[0] != "core" {
		t.Errorf("hosts %+v, groups %v", list.Hosts, list.Groups)
	}
	e.get("/api/v1/hosts/edge-1", &h)
	if code, b := e.write("DELETE", "/api/v1/hosts/edge-1", ""); code != 200 || !strings.Contains(string(b), `"deleted":"edge-1"`) {
		t.Errorf("delete: %d %s", code, b)
	}
	if code, _, _ := e.do("GET", "/api/v1/hosts/edge-1", ""); code != http.StatusNotFound {
		t.Errorf("a deleted host: %d", code)
	}
}

// fakeProfiles is a JFR profile stage's provider.
type fakeProfiles struct{}

func (fakeProfiles) Stacks(_ context.Context, kind, host string, since, until int64) (*flame.Stacks, error) {
	if host != "jvm-1" || kind == "alloc" {
		return nil, nil
	}
	if kind == "lock" {
		s := &flame.Stacks{}
		s.AddFolded("main;work;java.lang.Object", 25_000_000)
		return s, nil
	}
	s := &flame.Stacks{}
	s.AddFolded("main;work;compute", 30)
	s.AddFolded("main;work;io", 10)
	s.AddFolded("main;idle", 5)
	return s, nil
}

func (fakeProfiles) Views(_ context.Context, host string, since, until int64) (*jfrview.Views, error) {
	if host != "jvm-1" {
		return nil, nil
	}
	return &jfrview.Views{GC: jfrview.GCView{Count: 2, TotalPauseNs: 30, LongestNs: 20}, Monitors: []jfrview.Monitor{{Class: "java.lang.Object", Count: 3, TotalNs: 90, MaxNs: 40}}}, nil
}

// TestServicesOfComponents: the JFR flame graphs and the live view come
// from the components that publish them; until one does, the API says
// so.
func TestServicesOfComponents(t *testing.T) {
	shared := &pipeline.Shared{}
	e := newEnv(t, func(o *Options) { o.Shared = shared })
	code, b, _ := e.do("GET", "/api/v1/profiles/flame?host=jvm-1", "")
	if code != http.StatusNotFound || !strings.Contains(string(b), "no profiles") || strings.Contains(string(b), "cluster node") {
		t.Errorf("without a profile stage: %d %s", code, b)
	}
	code, b, _ = e.do("GET", "/api/live", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "no live view") {
		t.Errorf("without a stream sink: %d %s", code, b)
	}
	shared.SetProfiles(fakeProfiles{})
	var f Flame
	e.get("/api/v1/profiles/flame?host=jvm-1&since=1h", &f)
	if f.Unit != "samples" || f.Root.Value != 45 || f.Root.Children[0].Name != "main" || len(f.Root.Children[0].Children) != 2 {
		t.Errorf("profile %+v", f.Root)
	}
	if folded := string(e.get("/api/v1/profiles/flame?host=jvm-1&format=folded", nil)); !strings.Contains(folded, "main;work;compute 30\n") {
		t.Errorf("folded %s", folded)
	}
	if code, b, _ := e.do("GET", "/api/v1/profiles/flame?host=other", ""); code != http.StatusNotFound || !strings.Contains(string(b), "no samples") {
		t.Errorf("a host without samples: %d %s", code, b)
	}
	e.get("/api/v1/profiles/flame?host=jvm-1&kind=lock", &f)
	if f.Unit != "ns" || f.Root.Value != 25_000_000 {
		t.Errorf("lock profile: unit %s, %+v", f.Unit, f.Root)
	}
	if code, b, _ := e.do("GET", "/api/v1/profiles/flame?host=jvm-1&kind=alloc", ""); code != http.StatusNotFound || !strings.Contains(string(b), "no alloc events (jdk.ObjectAllocationSample)") {
		t.Errorf("a kind without events: %d %s", code, b)
	}
	if code, b, _ := e.do("GET", "/api/v1/profiles/flame?host=jvm-1&kind=heap", ""); code != http.StatusBadRequest || !strings.Contains(string(b), "kind") {
		t.Errorf("an unknown kind: %d %s", code, b)
	}
	var v jfrview.Views
	e.get("/api/v1/profiles/views?host=jvm-1&since=1h", &v)
	if v.GC.Count != 2 || len(v.Monitors) != 1 || v.Monitors[0].MaxNs != 40 {
		t.Errorf("views %+v", v)
	}
	if code, b, _ := e.do("GET", "/api/v1/profiles/views?host=other", ""); code != http.StatusNotFound || !strings.Contains(string(b), "no JFR events of host other") {
		t.Errorf("views of a host without events: %d %s", code, b)
	}
	shared.SetLive(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !CanWrite(r.Context()) {
			w.Write([]byte("read-only"))
			return
		}
		w.Write([]byte("control"))
	}))
	if code, b, _ := e.do("GET", "/api/live", ""); code != 200 || string(b) != "read-only" {
		t.Errorf("live: %d %s", code, b)
	}
	tok, _ := testToken()
	if code, b, _ := e.do("GET", "/api/live", "", "Authorization", "Bearer "+tok); code != 200 || string(b) != "control" {
		t.Errorf("live with a token: %d %s", code, b)
	}
	if code, _, _ := e.do("GET", "/api/live", "", "Origin", "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("live from another origin: %d", code)
	}
}

// TestClosed: once closed (the bridge stops), the API answers 503 and no
// longer touches the store; health stays.
func TestClosed(t *testing.T) {
	e := newEnv(t, nil, shop(1, time.Now())...)
	e.api.Close()
	if code, _, _ := e.do("GET", "/api/v1/traces", ""); code != http.StatusServiceUnavailable {
		t.Errorf("after Close: %d", code)
	}
	if code, b, _ := e.do("GET", "/api/services", ""); code != http.StatusServiceUnavailable || !strings.Contains(string(b), `"errors":[{"code":503`) {
		t.Errorf("Jaeger after Close: %d %s", code, b)
	}
	e.api.Close()
	if code, _, _ := e.do("GET", "/healthz", ""); code != http.StatusOK {
		t.Errorf("health after Close: %d", code)
	}
	if code, _, _ := e.do("GET", "/readyz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("readiness after Close: %d", code)
	}
	noStore := newEnv(t, func(o *Options) { o.Store = nil })
	if code, b, _ := noStore.do("GET", "/api/v1/traces", ""); code != http.StatusServiceUnavailable || !strings.Contains(string(b), "no trace store") {
		t.Errorf("without a store: %d %s", code, b)
	}
}

// TestHostsWithoutStore: the hosts pages need the host table, not a
// trace store: without one hosts are added, listed, changed and deleted
// (sizes and rates 0); without a host table they answer 503.
func TestHostsWithoutStore(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Store = func() *store.Store { return nil } })
	if code, b := e.write("POST", "/api/v1/hosts", `{"name":"edge-1","secret":"s3cret","maxSize":"1GiB"}`); code != http.StatusCreated {
		t.Fatalf("add: %d %s", code, b)
	}
	if code, b := e.write("PATCH", "/api/v1/hosts/edge-1", `{"enabled":false}`); code != 200 {
		t.Fatalf("patch: %d %s", code, b)
	}
	var list HostList
	e.get("/api/v1/hosts", &list)
	if len(list.Hosts) != 1 || list.Hosts[0].Enabled || list.Hosts[0].MaxSize != 1<<30 || list.Hosts[0].Size != 0 || !list.Hosts[0].Secret {
		t.Fatalf("hosts %+v", list.Hosts)
	}
	if code, b := e.write("DELETE", "/api/v1/hosts/edge-1", ""); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if _, err := e.hosts.Host("edge-1"); err == nil {
		t.Fatal("the deleted host is still in the table")
	}
	bare := New(Options{Store: func() *store.Store { return e.st }})
	defer bare.Close()
	srv := httptest.NewServer(bare)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/hosts")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("without a host table: %d", resp.StatusCode)
	}
}
