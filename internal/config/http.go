package config

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// DefaultHTTP is the HTTP listener of the embedded default (Jaeger's
// query port, so tools that know Jaeger find it).
const DefaultHTTP = "127.0.0.1:16686"

// HTTP is the `http:` section: the one listener of the HTTP API, Jaeger's
// query API, the metrics and health endpoints and the web UI. In YAML it
// is an address (`http: 127.0.0.1:16686`) or a mapping with the keys
// below. docs/API.md describes what it serves and who may do what.
type HTTP struct {
	// Listen is host:port ("": no HTTP listener).
	Listen string `yaml:"listen"`
	// TLS: a certificate and key make the listener speak HTTPS.
	TLS pipeline.TLSFiles `yaml:"tls"`
	// Insecure allows plain HTTP on an address other than loopback
	// (which is refused otherwise: tokens would cross the network in
	// clear text).
	Insecure bool `yaml:"insecure"`
	// APITokens are argon2id hashes of the tokens that may write (hosts,
	// control, console) as `tracebridge token` prints them; never the
	// tokens themselves. APITokensFile is a file of more, one per line
	// (# starts a comment).
	APITokens     []string `yaml:"api_tokens"`
	APITokensFile string   `yaml:"api_tokens_file"`
	// ReadTokenRequired makes reads need a token from loopback too (a
	// reverse proxy on the same host makes every client look local).
	ReadTokenRequired bool `yaml:"read_token_required"`
	// LiveMaxClients caps the clients of the live view at /api/live (64
	// when 0); LiveClientBuffer bounds the bytes waiting for one of them
	// (4 MiB when 0): a client that falls behind by more is closed.
	LiveMaxClients   int `yaml:"live_max_clients"`
	LiveClientBuffer int `yaml:"live_client_buffer"`
}

// IsZero reports whether the section is empty (left out when written).
func (h HTTP) IsZero() bool { return reflect.ValueOf(h).IsZero() }

// UnmarshalYAML takes an address or a mapping; unknown keys are errors.
func (h *HTTP) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*h = HTTP{}
		return n.Decode(&h.Listen)
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: http: want an address (127.0.0.1:16686) or a mapping {listen, tls, insecure, api_tokens, api_tokens_file}", n.Line)
	}
	type plain HTTP
	if err := checkKeys(n, reflect.TypeFor[plain]()); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	if p.LiveMaxClients < 0 || p.LiveClientBuffer < 0 {
		return fmt.Errorf("line %d: http: live_max_clients and live_client_buffer must not be negative", n.Line)
	}
	*h = HTTP(p)
	return nil
}

// MarshalYAML writes an address alone as a string.
func (h HTTP) MarshalYAML() (any, error) {
	if rest := h; rest.Listen != "" {
		rest.Listen = ""
		if rest.IsZero() {
			return h.Listen, nil
		}
	}
	type plain HTTP
	return plain(h), nil
}
