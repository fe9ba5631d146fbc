package serve

import (
	"errors"
	"strings"
	"testing"
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
