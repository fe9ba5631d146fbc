package serve

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/tlstest"
)

// TestClusterNeedsSharedStore: a cluster node without a store sink, or
// with one on the local backend, is a configuration error saying what to
// do.
func TestClusterNeedsSharedStore(t *testing.T) {
	const section = `cluster: {node: n1, nats_listen: "127.0.0.1:1", replicas: 1}
receivers: [{type: zico, listen: "127.0.0.1:0"}]
`
	for name, tc := range map[string]struct{ sinks, want string }{
		"no store":      {`sinks: [{type: kieker-log}]`, "needs a store sink"},
		"local backend": {`sinks: [{type: store}]`, "needs backend: s3"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := parse(t, section+tc.sinks)
			cfg.DataDir = t.TempDir()
			s, err := Build(cfg, Settings{})
			if err == nil {
				s.Close()
				t.Fatal("built")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a configuration error saying %q", err, tc.want)
			}
		})
	}
}

// TestClusterStreamRefused: a cluster node's stream is the cluster's
// repository: its own listen or url is a configuration error saying so,
// before anything starts.
func TestClusterStreamRefused(t *testing.T) {
	const rest = `receivers: [{type: zico, listen: "127.0.0.1:0"}]
sinks: [{type: kieker-log}]
`
	for name, tc := range map[string]struct{ cfg, want string }{
		"own listen": {`cluster: {node: n1, nats_listen: "127.0.0.1:1", replicas: 1}
stream: {listen: "127.0.0.1:0"}
`, "a cluster node's stream is the cluster's one repository"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := parse(t, tc.cfg+rest)
			cfg.DataDir = t.TempDir()
			s, err := Build(cfg, Settings{})
			if err == nil {
				s.Close()
				t.Fatal("built")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want a configuration error saying %q", err, tc.want)
			}
		})
	}
}

// TestNATSTLS: nats_tls's files become the node's TLS configuration (the
// CA trusted, the client certificate); a CA file without a certificate
// and a missing key are configuration errors naming the key.
func TestNATSTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := tlstest.Files(t, dir)
	c, err := natsTLS(&config.ClusterTLS{CA: cert, Cert: cert, Key: key})
	if err != nil || c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Fatalf("natsTLS: %+v, %v", c, err)
	}
	if c, err := natsTLS(nil); c != nil || err != nil {
		t.Fatalf("no nats_tls: %v %v", c, err)
	}
	if _, err := natsTLS(&config.ClusterTLS{CA: key}); err == nil || !strings.Contains(err.Error(), "nats_tls: ca") {
		t.Errorf("a CA file of a key: %v", err)
	}
	if _, err := natsTLS(&config.ClusterTLS{Cert: cert, Key: filepath.Join(dir, "none.pem")}); err == nil || !strings.Contains(err.Error(), "nats_tls") {
		t.Errorf("a missing key: %v", err)
	}
}
