package stream

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/natslogin"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Type is the sink type this package builds.
const Type = "stream"

// DefaultListen is where the embedded server listens when nothing says
// otherwise.
const DefaultListen = "127.0.0.1:14222"

// Defaults of the repository.
const (
	DefaultMaxAge   = 24 * time.Hour
	DefaultMaxBytes = 1 << 30
	DefaultBuffer   = 64 << 20
	// DefaultQueueBatches is the engine's queue in front of a
	// best-effort stream unless queue_batches says otherwise: large
	// enough that a burst at the bridge's full ingest rate waits in it
	// while the stream's goroutine is not scheduled (2 cores shared by
	// receivers, other sinks and the NATS server), instead of being
	// dropped. A queued batch is what the receivers decoded (about
	// 1,000 Kieker records of a TCP read), shared with the other sinks.
	DefaultQueueBatches = 1024
)

// Config is the YAML configuration of the stream: the top-level `stream:`
// section of tracebridge.yaml (or a sink of type stream).
type Config struct {
	// Enabled: false turns the stream off (default true).
	Enabled *bool `yaml:"enabled"`
	// Listen is host:port of the embedded NATS server. Empty: the
	// bridge's embedded server wherever the broker-embedded receiver
	// has it, else DefaultListen.
	Listen string `yaml:"listen"`
	// TLS: a certificate and key make the embedded server's network
	// clients speak TLS; Insecure lets it serve plain text off loopback
	// (internal/listenpolicy). Its clients authenticate either way with
	// the credential under data_dir (DATA_DIR/nats/credentials).
	TLS      pipeline.TLSFiles `yaml:"tls"`
	Insecure bool              `yaml:"insecure"`
	// URL of an external NATS server with JetStream (nats://HOST:PORT,
	// tls://…) instead of the embedded one; User and Password, or the
	// URL's, authenticate.
	URL      string `yaml:"url"`
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// SubjectPrefix is the first token of the subjects (default
	// tracebridge); the stream names follow from it (TRACEBRIDGE,
	// TRACEBRIDGE_META).
	SubjectPrefix string `yaml:"subject_prefix"`
	// MaxAge and MaxBytes bound the repository (JFR's setMaxAge and
	// setMaxSize): the oldest messages go first. Defaults 24h and 1GiB;
	// 0 in YAML ("0s", 0) means unbounded.
	MaxAge   *pipeline.Duration `yaml:"max_age"`
	MaxBytes *pipeline.ByteSize `yaml:"max_bytes"`
	// Replicas of the streams on an external cluster (default 1).
	Replicas int `yaml:"replicas"`
	// Encoding of the data messages: binary (default) or json.
	Encoding string `yaml:"encoding"`
	// Traces publishes assembled traces on PREFIX.traces.<host> as JSON
	// (default false: the engine then assembles traces for the stream
	// too, and encoding each as JSON costs more than its records).
	Traces bool `yaml:"traces"`
	// Buffer bounds what waits to be published while the NATS server is
	// slow or unreachable (default 64MiB); beyond it records are dropped
	// and counted (subscribers see the gap).
	Buffer pipeline.ByteSize `yaml:"buffer"`
	// MaxPending bounds the publishes awaiting the server's
	// acknowledgement (default 4096).
	MaxPending int `yaml:"max_pending"`
	// ControlTokenFile holds the token control commands must carry
	// (tracebridge control --token-file). Without it, control is
	// accepted from loopback clients of the embedded server only.
	ControlTokenFile string `yaml:"control_token_file"`
	// ProbeControllers are the Kieker TCP controllers of monitored
	// programs that `tracebridge control URL probe …` reaches.
	ProbeControllers []control.Probe `yaml:"probe_controllers"`

	// Cluster is set by serve on a cluster node (it is not a YAML key):
	// the stream publishes into the cluster's NATS, the one repository
	// every node writes (docs/CLUSTER.md, "Live stream").
	Cluster *ClusterTarget `yaml:"-"`
}

// ClusterTarget is where a cluster node's stream publishes: the node's
// embedded NATS server (one of the cluster's), or the URLs of an existing
// NATS cluster. Listen and URL are then not set.
type ClusterTarget struct {
	// Node is the node's name: its metadata subject (PREFIX.meta.<node>)
	// and the NodeHeader of its messages.
	Node string
	// Server is the node's embedded server (the cluster owns it: the
	// sink does not stop it); nil with an existing NATS cluster.
	Server *natsd.Server
	// URL (comma-separated URLs) and Login (the node's: nats_user and
	// nats_password, nats_token or nats_creds, and nats_tls) reach the
	// existing NATS cluster when Server is nil.
	URL   string
	Login natslogin.Login
	// Replicas of the repository's streams when the section does not say
	// (the cluster's replicas: the repository outlives a node).
	Replicas int
}

// On reports whether the stream runs.
func (c *Config) On() bool { return c.Enabled == nil || *c.Enabled }

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.URL != "" && c.Listen != "" {
		errs = append(errs, errors.New("listen (the embedded server) and url (an external server) exclude each other"))
	}
	if c.Listen != "" {
		if _, _, err := natsd.SplitListen(c.Listen); err != nil {
			errs = append(errs, fmt.Errorf("listen: %w", err))
		} else if err := listenpolicy.Check("listen", c.Listen, c.TLS.Enabled(), c.Insecure, "tls: {cert, key}"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.URL != "" && (c.TLS.Enabled() || c.Insecure) {
		errs = append(errs, errors.New("tls and insecure are for the embedded server (listen), not an external one (url)"))
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Hostname() == "" {
			errs = append(errs, errors.New("url: want nats://HOST:PORT or tls://HOST:PORT"))
		}
	}
	if err := streammsg.ValidatePrefix(c.SubjectPrefix); err != nil {
		errs = append(errs, err)
	}
	if c.MaxAge != nil && *c.MaxAge < 0 || c.MaxBytes != nil && *c.MaxBytes < 0 || c.Buffer < 0 || c.MaxPending < 0 || c.Replicas < 0 {
		errs = append(errs, errors.New("max_age, max_bytes, buffer, max_pending and replicas must not be negative"))
	}
	if c.MaxAge != nil && *c.MaxAge > 0 && time.Duration(*c.MaxAge) < 100*time.Millisecond {
		errs = append(errs, errors.New("max_age: at least 100ms (or 0 for unbounded)"))
	}
	switch c.Encoding {
	case "", "binary", "json":
	default:
		errs = append(errs, fmt.Errorf("encoding %q: want binary or json", c.Encoding))
	}
	if c.ControlTokenFile != "" {
		if _, err := readToken(c.ControlTokenFile); err != nil {
			errs = append(errs, fmt.Errorf("control_token_file: %w", err))
		}
	}
	if err := control.ValidateProbes(c.ProbeControllers); err != nil {
		errs = append(errs, fmt.Errorf("probe_controllers: %w", err))
	}
	return errors.Join(errs...)
}

func (c *Config) maxAge() time.Duration {
	if c.MaxAge == nil {
		return DefaultMaxAge
	}
	return time.Duration(*c.MaxAge)
}

func (c *Config) maxBytes() int64 {
	if c.MaxBytes == nil {
		return DefaultMaxBytes
	}
	return int64(*c.MaxBytes)
}

// readToken reads a token file: its first line, trimmed; it must not be
// empty.
func readToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, fmt.Errorf("%s holds no token", path)
	}
	return []byte(line), nil
}

// ReadToken reads a control token file as the bridge does (its first
// line, trimmed).
func ReadToken(path string) (string, error) {
	b, err := readToken(path)
	return string(b), err
}
