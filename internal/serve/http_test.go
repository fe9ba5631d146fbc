package serve

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/tlstest"
)

// cheapToken is a token with an argon2id hash of small parameters (the
// verifier takes them from the hash).
func cheapToken() (string, string) {
	tok := "tbt_serve-test"
	salt := []byte("fedcba9876543210")
	key := argon2.IDKey([]byte(tok), salt, 1, 1024, 1, 32)
	enc := base64.RawStdEncoding
	return tok, fmt.Sprintf("$argon2id$v=%d$m=1024,t=1,p=1$%s$%s", argon2.Version, enc.EncodeToString(salt), enc.EncodeToString(key))
}

type client struct {
	t    *testing.T
	base string
	tok  string
	http *http.Client
}

func (c *client) do(method, path, body string, token bool) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if token {
		req.Header.Set("Authorization", "Bearer "+c.tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (c *client) json(method, path, body string, want int, v any) {
	c.t.Helper()
	code, b := c.do(method, path, body, method != "GET")
	if code != want {
		c.t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, code, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
}

type receiver struct {
	Name, Type, Where, State string
}

// TestHTTPConsole: the http listener serves the API of the running
// bridge: its receivers and sinks, the console's control (stop, start,
// add with validation, a KDB mapping edited and applied), the component
// types for the forms, the effective YAML, metrics; it stops before the
// sinks close.
func TestHTTPConsole(t *testing.T) {
	tok, hash := cheapToken()
	dir := t.TempDir()
	cfg := parse(t, fmt.Sprintf(`
http: {listen: "127.0.0.1:0", api_tokens: [%q]}
receivers:
  - {name: k, type: kieker-tcp, listen: "127.0.0.1:0"}
  - {name: kdb, type: tcp-server, listen: "127.0.0.1:0"}
sinks:
  - {type: kieker-log}
  - {type: store}
`, hash))
	cfg.DataDir = dir
	s, stop := start(t, cfg, Settings{Version: "test"})
	if s.HTTPAddr == "" || s.HTTPScheme != "http" {
		t.Fatalf("http on %q %q", s.HTTPScheme, s.HTTPAddr)
	}
	c := &client{t: t, base: "http://" + s.HTTPAddr, tok: tok, http: &http.Client{Timeout: 30 * time.Second}}
	for i := 0; ; i++ {
		if code, _ := c.do("GET", "/readyz", "", false); code == 200 {
			break
		}
		if i > 100 {
			t.Fatal("not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}

	var rl struct{ Receivers []receiver }
	c.json("GET", "/api/v1/receivers", "", 200, &rl)
	if len(rl.Receivers) != 2 || rl.Receivers[1].Name != "kdb" || rl.Receivers[1].State != "running" {
		t.Fatalf("receivers %+v", rl)
	}
	var sl struct {
		Sinks []struct{ Name, Type, Policy string }
	}
	c.json("GET", "/api/v1/sinks", "", 200, &sl)
	if len(sl.Sinks) != 2 || sl.Sinks[1].Type != "store" || sl.Sinks[1].Policy != "durable" {
		t.Fatalf("sinks %+v", sl)
	}
	var st struct {
		Version         string
		Store, CanWrite bool
	}
	c.json("GET", "/api/v1/status", "", 200, &st)
	if st.Version != "test" || !st.Store || st.CanWrite {
		t.Fatalf("status %+v", st)
	}
	var types struct {
		Receivers []struct {
			Type string
			Keys []struct {
				Name, Type string
				Default    any
				Keys       []struct{ Name string }
			}
		}
	}
	c.json("GET", "/api/v1/component-types", "", 200, &types)
	keysOf := map[string]map[string]string{}
	for _, r := range types.Receivers {
		keysOf[r.Type] = map[string]string{}
		for _, k := range r.Keys {
			keysOf[r.Type][k.Name] = k.Type
			if k.Name == "tls" && (len(k.Keys) != 2 || k.Keys[0].Name != "cert") {
				t.Errorf("%s: tls keys %+v", r.Type, k.Keys)
			}
		}
	}
	if keysOf["tcp-server"]["listen"] != "string" || keysOf["tcp-server"]["mapping"] != "string" || keysOf["zico"] == nil {
		t.Errorf("component types %v", keysOf)
	}

	// Add a receiver from the console's form; bad forms say why.
	var added receiver
	c.json("POST", "/api/v1/receivers", `{"type":"tcp-server","name":"extra","config":{"listen":"127.0.0.1:0","max_connections":8}}`, 201, &added)
	if added.Name != "extra" || added.State != "running" || !strings.HasPrefix(added.Where, "listening on 127.0.0.1:") {
		t.Fatalf("added %+v", added)
	}
	kdbAddr := strings.TrimPrefix(rl.Receivers[1].Where, "listening on ")
	for _, bad := range []struct {
		body    string
		code    int
		mention string
	}{
		{`{"type":"tcp-server","config":{"lisen":"x"}}`, 400, `unknown key "lisen"`},
		{`{"type":"warp-drive"}`, 400, "unknown type"},
		{`{"config":{}}`, 400, "type: required"},
		{`{"type":"tcp-server","name":"extra","config":{"listen":"127.0.0.1:0"}}`, 400, "name used twice"},
		{`{"type":"tcp-server","config":{"listen":"` + kdbAddr + `"}}`, 409, "address already in use"},
		{`{"type":"tcp-server","bogus":1}`, 400, "unknown field"},
	} {
		code, b := c.do("POST", "/api/v1/receivers", bad.body, true)
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		if code != bad.code || !strings.Contains(e.Error, bad.mention) || strings.Contains(e.Error, "line 0") {
			t.Errorf("add %s: %d %s; want %d mentioning %q", bad.body, code, b, bad.code, bad.mention)
		}
	}

	// Stop and start.
	var r receiver
	c.json("POST", "/api/v1/receivers/kdb/stop", "", 200, &r)
	if r.State != "stopped" {
		t.Errorf("stopped: %+v", r)
	}
	if code, b := c.do("POST", "/api/v1/receivers/kdb/stop", "", true); code != 409 {
		t.Errorf("stop twice: %d %s", code, b)
	}
	c.json("POST", "/api/v1/receivers/kdb/start", "", 200, &r)
	if r.State != "running" {
		t.Errorf("started: %+v", r)
	}
	if code, _ := c.do("POST", "/api/v1/receivers/nobody/stop", "", true); code != 404 {
		t.Errorf("stop an unknown receiver: %d", code)
	}

	// The KDB mapping: the default, then an edited one, applied.
	var m struct {
		Path      string
		Default   bool
		Restarted bool
		Entries   []struct {
			ID   int32
			Type string
		}
	}
	c.json("GET", "/api/v1/receivers/kdb/mapping", "", 200, &m)
	if !m.Default || len(m.Entries) != 16 || m.Entries[0].Type != "kieker.common.record.flow.trace.operation.BeforeOperationEvent" {
		t.Fatalf("default mapping %+v", m)
	}
	body := `{"entries":[{"id":10,"type":"kieker.common.record.flow.trace.operation.BeforeOperationEvent"},{"id":11,"type":"kieker.common.record.flow.trace.operation.AfterOperationEvent"},{"id":12,"type":"kieker.common.record.flow.trace.TraceMetadata"}]}`
	c.json("PUT", "/api/v1/receivers/kdb/mapping?restart=true", body, 200, &m)
	if m.Default || !m.Restarted || len(m.Entries) != 3 || m.Path != filepath.Join(dir, "mappings", "kdb.map") {
		t.Fatalf("saved mapping %+v", m)
	}
	if b, err := os.ReadFile(m.Path); err != nil || !strings.HasPrefix(string(b), "10=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n") {
		t.Fatalf("mapping file %q %v", b, err)
	}
	c.json("GET", "/api/v1/receivers/kdb/mapping", "", 200, &m)
	if m.Default || len(m.Entries) != 3 {
		t.Errorf("mapping after saving %+v", m)
	}
	for _, bad := range []struct{ path, body, mention string }{
		{"/api/v1/receivers/kdb/mapping", `{"entries":[{"id":1,"type":"no.such.Record"}]}`, "unknown record class"},
		{"/api/v1/receivers/kdb/mapping", `{"entries":[{"id":1,"type":"kieker.common.record.flow.trace.TraceMetadata"},{"id":1,"type":"kieker.common.record.flow.trace.TraceMetadata"}]}`, "duplicate id"},
		{"/api/v1/receivers/kdb/mapping", `{"entries":[]}`, "entries"},
		{"/api/v1/receivers/k/mapping", `{"entries":[{"id":1,"type":"kieker.common.record.flow.trace.TraceMetadata"}]}`, "takes no KDB mapping"},
	} {
		if code, b := c.do("PUT", bad.path, bad.body, true); code != 400 || !strings.Contains(string(b), bad.mention) {
			t.Errorf("PUT %s %s: %d %s; want 400 mentioning %q", bad.path, bad.body, code, b, bad.mention)
		}
	}
	var rt struct {
		Types []struct {
			Name   string
			Fields []struct{ Name, Kind string }
		}
	}
	c.json("GET", "/api/v1/record-types", "", 200, &rt)
	if len(rt.Types) < 60 {
		t.Errorf("%d record types", len(rt.Types))
	}

	// The effective configuration: with a token only.
	if code, _ := c.do("GET", "/api/v1/config", "", false); code != 401 {
		t.Errorf("config without a token: %d", code)
	}
	code, y := c.do("GET", "/api/v1/config", "", true)
	if code != 200 || !strings.Contains(string(y), "name: extra") || !strings.Contains(string(y), "mapping: "+m.Path) {
		t.Errorf("config: %d\n%s", code, y)
	}
	if code, b := c.do("GET", "/metrics", "", false); code != 200 || !strings.Contains(string(b), "tracebridge_connections") {
		t.Errorf("metrics: %d", code)
	}

	// Requests while the bridge stops: answered or refused, never a
	// read of a closed store (the race detector watches).
	var wg sync.WaitGroup
	quit := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-quit:
					return
				default:
				}
				if resp, err := c.http.Get(c.base + "/api/v1/traces"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	close(quit)
	wg.Wait()
	if _, err := c.http.Get(c.base + "/healthz"); err == nil {
		t.Error("the http listener still answers after Run returned")
	}
}

// TestHTTPListenerSecurity: a listener off loopback needs TLS or an
// explicit insecure; tokens in the configuration must be hashes.
func TestHTTPListenerSecurity(t *testing.T) {
	dir := t.TempDir()
	cert, key := tlstest.Files(t, dir)
	tokFile := filepath.Join(dir, "tokens")
	os.WriteFile(tokFile, []byte("tbt_plain-token\n"), 0o600)
	for _, c := range []struct {
		http, wantErr string
	}{
		{`"0.0.0.0:0"`, "not a loopback address"},
		{`{listen: ":0"}`, "every interface"},
		// (Off loopback with insecure or TLS is accepted: api's
		// TestCheckListen; tests bind loopback only.)
		{fmt.Sprintf(`{listen: "127.0.0.1:0", tls: {cert: %q, key: %q}}`, cert, key), ""},
		{fmt.Sprintf(`{listen: "127.0.0.1:0", tls: {cert: %q}}`, cert), "cert and key go together"},
		{`{listen: "127.0.0.1:0", api_tokens: [tbt_plain]}`, "not an argon2id hash"},
		{fmt.Sprintf(`{listen: "127.0.0.1:0", api_tokens_file: %q}`, tokFile), "not an argon2id hash"},
		{`{listen: "127.0.0.1:0", api_tokens_file: /nonexistent}`, "api_tokens_file"},
		{`{listen: "127.0.0.1:0", colour: red}`, `unknown key "colour"`},
	} {
		cfg, err := parseErr(fmt.Sprintf("http: %s\nreceivers: [{type: kieker-tcp, listen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log}]\n", c.http))
		if err == nil {
			cfg.DataDir = t.TempDir()
			var s *Server
			s, err = Build(cfg, Settings{})
			if err == nil {
				s.Close()
			} else if !errors.Is(err, ErrConfig) {
				t.Errorf("http: %s: %v is not a configuration error", c.http, err)
			}
		}
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("http: %s: %v, want %q", c.http, err, c.wantErr)
		}
	}

	// HTTPS answers.
	cfg := parse(t, fmt.Sprintf("http: {listen: '127.0.0.1:0', tls: {cert: %q, key: %q}}\nreceivers: [{type: kieker-tcp, listen: '127.0.0.1:0'}]\nsinks: [{type: kieker-log}]\n", cert, key))
	s, stop := start(t, cfg, Settings{})
	pool := x509.NewCertPool()
	pb, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(pb)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + s.HTTPAddr + "/healthz")
	if err != nil || resp.StatusCode != 200 || s.HTTPScheme != "https" {
		t.Fatalf("https: %v %v", resp, err)
	}
	resp.Body.Close()
	// Without a store the trace endpoints say so.
	resp, err = hc.Get("https://" + s.HTTPAddr + "/api/v1/traces")
	if err != nil || resp.StatusCode != 503 {
		t.Errorf("no store: %v %v", resp, err)
	}
	resp.Body.Close()
	stop()
}

func parseErr(yaml string) (*config.Config, error) { return config.Parse([]byte(yaml)) }
