package config

import (
	"strings"
	"testing"
)

// TestHTTPSection: `http:` is an address or a mapping; unknown keys are
// errors; it is written back as it was given.
func TestHTTPSection(t *testing.T) {
	c, err := Parse([]byte("http: 127.0.0.1:16686\n"))
	if err != nil || c.HTTP.Listen != "127.0.0.1:16686" || c.HTTP.Insecure {
		t.Fatalf("address: %+v %v", c.HTTP, err)
	}
	y, _ := c.Marshal()
	if !strings.Contains(string(y), "http: 127.0.0.1:16686\n") {
		t.Errorf("written back:\n%s", y)
	}
	c, err = Parse([]byte(`
http:
  listen: 0.0.0.0:16686
  tls: {cert: c.pem, key: k.pem}
  insecure: false
  api_tokens_file: /etc/tracebridge/tokens
  api_tokens: ["$argon2id$v=19$m=65536,t=3,p=2$c2FsdA$aGFzaA"]
  read_token_required: true
  live_max_clients: 8
  live_client_buffer: 1048576
`))
	if err != nil || c.HTTP.Listen != "0.0.0.0:16686" || c.HTTP.TLS.Cert != "c.pem" || c.HTTP.APITokensFile != "/etc/tracebridge/tokens" ||
		len(c.HTTP.APITokens) != 1 || !c.HTTP.ReadTokenRequired || c.HTTP.LiveMaxClients != 8 || c.HTTP.LiveClientBuffer != 1<<20 {
		t.Fatalf("mapping: %+v %v", c.HTTP, err)
	}
	y, _ = c.Marshal()
	again, err := Parse(y)
	if err != nil || again.HTTP.TLS != c.HTTP.TLS || again.HTTP.APITokens[0] != c.HTTP.APITokens[0] {
		t.Errorf("round trip:\n%s\n%+v %v", y, again.HTTP, err)
	}
	for _, bad := range []string{"http: {listen: x, tsl: {}}\n", "http: [a, b]\n", "http: {tls: {cert: a, pem: b}}\n", "http: {live_max_clients: -1}\n"} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "http") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if c, _ := Parse([]byte("metrics: 127.0.0.1:1\n")); !c.HTTP.IsZero() {
		t.Error("no http section")
	}
	if y, _ := (&Config{}).Marshal(); strings.Contains(string(y), "http") {
		t.Errorf("an empty http section is written:\n%s", y)
	}
	if Default().HTTP.Listen != DefaultHTTP {
		t.Error("the embedded default has no HTTP listener")
	}
}
