package config

import (
	"strings"
	"testing"
)

func TestClusterSection(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string // "" valid, else a part of the error
	}{
		{"embedded", `{node: n1, nats_listen: "127.0.0.1:4222", cluster_listen: "127.0.0.1:6222", routes: ["127.0.0.2:6222", "127.0.0.3:6222"]}`, ""},
		{"external", `{node: n1, nats: "nats://a:4222,nats://b:4222"}`, ""},
		{"single", `{node: n1, nats_listen: "127.0.0.1:4222", replicas: 1}`, ""},
		{"no node", `{nats: "nats://a:4222"}`, "cluster: node"},
		{"bad node", `{node: "a b", nats: "nats://a:4222"}`, "cluster: node"},
		{"no listen", `{node: n1}`, "nats_listen: missing"},
		{"both", `{node: n1, nats: "nats://a:4222", nats_listen: "127.0.0.1:4222"}`, "an existing NATS cluster replaces"},
		{"bad url", `{node: n1, nats: "a:4222"}`, "want nats://"},
		{"too few routes", `{node: n1, nats_listen: "127.0.0.1:4222", cluster_listen: "127.0.0.1:6222", routes: ["127.0.0.2:6222"]}`, "3 replicas need at least 3 nodes"},
		{"partitions", `{node: n1, nats: "nats://a:4222", partitions: 100000}`, "partitions"},
		{"replicas", `{node: n1, nats: "nats://a:4222", replicas: 7}`, "replicas"},
		{"off loopback", `{node: n1, nats_listen: "10.0.0.1:4222", replicas: 1}`, "not a loopback address"},
		{"no port", `{node: n1, nats_listen: "127.0.0.1", replicas: 1}`, "nats_listen"},
		{"limits", `{node: n1, nats: "nats://a:4222", stream_max_bytes: 10GiB, stream_max_age: 24h}`, ""},
		{"negative age", `{node: n1, nats: "nats://a:4222", stream_max_age: -1h}`, "cluster: stream_max_age: -1h0m0s: must not be negative"},
		{"small limit", `{node: n1, nats: "nats://a:4222", stream_max_bytes: 1MiB}`, "stream_max_bytes"},
		{"user", `{node: n1, nats: "tls://a:4222", nats_user: tb, nats_password: s3cret, nats_tls: {ca: ca.pem, cert: c.pem, key: k.pem}}`, ""},
		{"token", `{node: n1, nats: "nats://a:4222", nats_token: t0ken}`, ""},
		{"creds", `{node: n1, nats: "nats://a:4222", nats_creds: /etc/tb.creds, nats_tls: {ca: ca.pem}}`, ""},
		{"two auths", `{node: n1, nats: "nats://a:4222", nats_token: t, nats_creds: c.creds}`, "give one of"},
		{"user alone", `{node: n1, nats: "nats://a:4222", nats_user: tb}`, "go together"},
		{"cert alone", `{node: n1, nats: "nats://a:4222", nats_tls: {cert: c.pem}}`, "cert and key"},
		{"auth embedded", `{node: n1, nats_listen: "127.0.0.1:4222", replicas: 1, nats_token: t}`, "existing NATS cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte("receivers: [{type: zico}]\nsinks: [{type: store}]\ncluster: " + tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Normalize()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if tc.want == "" && (c.Cluster.Partitions == 0 || c.Cluster.Replicas == 0) {
				t.Fatalf("defaults not filled in: %+v", c.Cluster)
			}
		})
	}
	if _, err := Parse([]byte("cluster: {node: n1, nodes: 3}")); err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("an unknown key: %v", err)
	}
}

// TestClusterExamples: the node files of examples/cluster are valid.
func TestClusterExamples(t *testing.T) {
	for _, n := range []string{"node1", "node2", "node3"} {
		c, err := Load("../../examples/cluster/" + n + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Normalize(); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if c.Cluster == nil || c.Cluster.Node != "n"+n[4:] || len(c.Cluster.Routes) != 2 {
			t.Fatalf("%s: cluster section %+v", n, c.Cluster)
		}
	}
}
