package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Cluster is the `cluster:` section: this bridge is one node of a
// cluster (docs/CLUSTER.md). Receivers publish what they decode to a
// replicated JetStream stream; the owner of each partition assembles its
// traces into the shared store. Either the node runs an embedded NATS
// server in a cluster with the other nodes' (nats_listen, cluster_listen,
// routes), or it connects to an existing NATS cluster (nats).
type Cluster struct {
	// Node is this node's name, unique in the cluster (letters, digits,
	// '-' and '_').
	Node string `yaml:"node"`
	// NATSListen is the client address of this node's embedded NATS
	// server (tail, dump, control and the other nodes' clients connect
	// there).
	NATSListen string `yaml:"nats_listen"`
	// ClusterListen is the embedded server's route address; Routes the
	// other nodes' route addresses (host:port, or nats-route://host:port).
	ClusterListen string   `yaml:"cluster_listen"`
	Routes        []string `yaml:"routes"`
	// Partitions of the stream (default 32); each has one owner at a time.
	Partitions int `yaml:"partitions"`
	// Replicas of the stream and the key-value buckets (default 3).
	Replicas int `yaml:"replicas"`
	// NATS, instead of the embedded server: the URLs of an existing NATS
	// cluster with JetStream, comma-separated
	// (nats://a:4222,nats://b:4222).
	NATS string `yaml:"nats"`
	// Credentials for the existing NATS cluster (nats:): a user and
	// password, a token, or a .creds file (a user JWT and its NKey seed,
	// decentralized auth); NATSTLS the CA its servers' certificates are
	// checked against and a client certificate, when it wants one. The
	// embedded server has credentials of its own (<data_dir>/nats).
	NATSUser     string      `yaml:"nats_user"`
	NATSPassword string      `yaml:"nats_password"`
	NATSToken    string      `yaml:"nats_token"`
	NATSCreds    string      `yaml:"nats_creds"`
	NATSTLS      *ClusterTLS `yaml:"nats_tls"`
	// StreamMaxBytes bounds the stream (0: half of the JetStream storage
	// of the node's embedded server, or of the account's storage limit
	// with nats:); a full stream refuses new records (clients are
	// answered busy) until checkpoints catch up. StreamMaxAge drops
	// records older than it from the stream even when they are not yet
	// in blocks (0: never).
	StreamMaxBytes pipeline.ByteSize `yaml:"stream_max_bytes"`
	StreamMaxAge   pipeline.Duration `yaml:"stream_max_age"`
}

// ClusterTLS is the TLS of a node's connections to an existing NATS
// cluster (PEM files): CA, the certificates to trust (empty: the
// system's); Cert and Key, a client certificate (both or neither).
type ClusterTLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Defaults of the cluster section.
const (
	DefaultPartitions = 32
	DefaultReplicas   = 3
	// MaxPartitions bounds partitions: every node keeps a lease, a
	// consumer and an assembler per partition it owns.
	MaxPartitions = 4096
	// MinStreamBytes is the least stream_max_bytes: room for a few
	// messages of the largest size (4 MiB).
	MinStreamBytes = 64 << 20
)

var nodeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Normalize fills in the defaults and checks the section, returning every
// problem found with its key.
func (c *Cluster) Normalize() error {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("cluster: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if !nodeName.MatchString(c.Node) {
		bad("node", "%q: want a name of 1–64 letters, digits, '-' or '_', unique in the cluster", c.Node)
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		bad("partitions", "%d: want 1 to %d", c.Partitions, MaxPartitions)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad("replicas", "%d: want 1 to 5 (JetStream's limit)", c.Replicas)
	}
	if c.StreamMaxBytes < 0 {
		bad("stream_max_bytes", "%d: must not be negative", int64(c.StreamMaxBytes))
	}
	if c.StreamMaxAge < 0 {
		bad("stream_max_age", "%s: must not be negative", time.Duration(c.StreamMaxAge))
	}
	if c.StreamMaxBytes > 0 && c.StreamMaxBytes < MinStreamBytes {
		bad("stream_max_bytes", "%s: want at least %s (a few of the largest messages)", c.StreamMaxBytes, pipeline.ByteSize(MinStreamBytes))
	}
	auth := 0
	for _, set := range []bool{c.NATSUser != "" || c.NATSPassword != "", c.NATSToken != "", c.NATSCreds != ""} {
		if set {
			auth++
		}
	}
	if c.NATS == "" && (auth > 0 || c.NATSTLS != nil) {
		bad("nats_user", "nats_user, nats_password, nats_token, nats_creds and nats_tls are for an existing NATS cluster (nats:); the embedded server has credentials of its own")
	}
	if auth > 1 {
		bad("nats_user", "give one of nats_user and nats_password, nats_token, nats_creds")
	}
	if (c.NATSUser == "") != (c.NATSPassword == "") {
		bad("nats_password", "nats_user and nats_password go together")
	}
	if t := c.NATSTLS; t != nil && (t.Cert == "") != (t.Key == "") {
		bad("nats_tls", "cert and key go together")
	}
	if c.NATS != "" {
		if c.NATSListen != "" || c.ClusterListen != "" || len(c.Routes) > 0 {
			bad("nats", "an existing NATS cluster replaces the embedded server: leave out nats_listen, cluster_listen and routes")
		}
		for _, u := range strings.Split(c.NATS, ",") {
			u = strings.TrimSpace(u)
			if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") {
				bad("nats", "%q: want nats://HOST:PORT or tls://HOST:PORT, comma-separated", u)
			}
		}
		return errors.Join(errs...)
	}
	if c.NATSListen == "" {
		bad("nats_listen", "missing: the address of this node's embedded NATS server (e.g. 127.0.0.1:4222), or set nats: to use an existing NATS cluster")
	} else if err := checkAddr(c.NATSListen); err != nil {
		bad("nats_listen", "%v", err)
	}
	if c.ClusterListen == "" {
		if c.Replicas > 1 || len(c.Routes) > 0 {
			bad("cluster_listen", "missing: the route address of this node's embedded NATS server (e.g. 127.0.0.1:6222)")
		}
	} else if err := checkAddr(c.ClusterListen); err != nil {
		bad("cluster_listen", "%v", err)
	}
	for _, r := range c.Routes {
		if err := checkAddr(strings.TrimPrefix(r, "nats-route://")); err != nil {
			bad("routes", "%q: %v", r, err)
		}
	}
	if c.Replicas > 1 && len(c.Routes)+1 < c.Replicas {
		bad("replicas", "%d replicas need at least %d nodes: routes names %d other node(s)", c.Replicas, c.Replicas, len(c.Routes))
	}
	// The embedded server authenticates every client, but the routes
	// between the nodes are plain text: off loopback they cross the
	// network in clear.
	for _, a := range append([]string{c.NATSListen, c.ClusterListen}, c.Routes...) {
		if h, _, err := net.SplitHostPort(strings.TrimPrefix(a, "nats-route://")); err == nil && !listenpolicy.Loopback(h) {
			bad("nats_listen", "%s is not a loopback address: the embedded cluster's routes speak plain text; run the nodes on loopback (tests, one machine) or use an existing NATS cluster with TLS (nats: tls://…)", a)
			break
		}
	}
	return errors.Join(errs...)
}

// checkAddr checks a host:port address with a port.
func checkAddr(a string) error {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	if h == "" {
		return fmt.Errorf("%s: name the host (e.g. 127.0.0.1:%s)", a, p)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%s: port %q: want 1 to 65535", a, p)
	}
	return nil
}
