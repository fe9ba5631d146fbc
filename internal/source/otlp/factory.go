package otlp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	otlpcodec "github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// The receiver types this package builds.
const (
	TypeGRPC = "otlp-grpc"
	TypeHTTP = "otlp-http"
)

// Defaults.
const (
	DefaultGRPCListen      = "127.0.0.1:4317"
	DefaultHTTPListen      = "127.0.0.1:4318"
	DefaultGRPCMessageSize = 4 << 20  // gRPC's own default
	DefaultHTTPMessageSize = 16 << 20 // after decompression
	DefaultEmitTimeout     = time.Second
	// DefaultMaxInflightBytes bounds the request bytes a receiver reads
	// and decodes at once, over all its requests.
	DefaultMaxInflightBytes = 64 << 20
	DefaultDrainTimeout     = 5 * time.Second
)

// TLS names a certificate and its key (PEM files); both empty: plain
// text.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

func (t TLS) validate() error {
	if (t.Cert == "") != (t.Key == "") {
		return errors.New("tls: cert and key go together")
	}
	return nil
}

// config loads the certificate (nil without TLS).
func (t TLS) config() (*tls.Config, error) {
	if t.Cert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, fmt.Errorf("tls: %w", err))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Limits bound what one span may carry (0: the codec's defaults, see
// internal/codec/otlp); a span beyond them is rejected on its own.
type Limits struct {
	MaxAttributes int `yaml:"max_attributes"`
	MaxEvents     int `yaml:"max_events"`
	MaxLinks      int `yaml:"max_links"`
	MaxStringLen  int `yaml:"max_string_len"`
	MaxDepth      int `yaml:"max_depth"`
	// MaxBatch is how many spans go into one batch (1024).
	MaxBatch int `yaml:"max_batch"`
}

// Config is the YAML configuration of otlp-grpc and otlp-http.
type Config struct {
	// Listen is host:port (defaults 127.0.0.1:4317 and :4318; port 0
	// picks a free one).
	Listen string `yaml:"listen"`
	TLS    TLS    `yaml:"tls"`
	// Insecure lets the receiver take plain text off loopback
	// (internal/listenpolicy); it says so at start-up.
	Insecure bool `yaml:"insecure"`
	// MaxMessageSize is the largest request in bytes: 4 MiB for gRPC,
	// 16 MiB for HTTP, measured after decompression.
	MaxMessageSize int `yaml:"max_message_size"`
	// MaxInflightBytes bounds the bytes of the requests being read and
	// decoded at once, over all requests of the receiver (64 MiB, and
	// more than twice MaxMessageSize): HTTP bodies as they are read
	// (after decompression), gRPC messages while they are decoded. A
	// request beyond it is answered 429 with Retry-After /
	// RESOURCE_EXHAUSTED with RetryInfo, as under back-pressure.
	MaxInflightBytes int `yaml:"max_inflight_bytes"`
	// EmitTimeout is how long a request waits for the pipeline to take
	// its spans before it is answered 429 / RESOURCE_EXHAUSTED (1s).
	EmitTimeout pipeline.Duration `yaml:"emit_timeout"`
	// DrainTimeout bounds the wait for requests in flight at shutdown
	// (5s).
	DrainTimeout pipeline.Duration `yaml:"drain_timeout"`
	// Security: every request carries a bearer token (HTTP's
	// Authorization header, gRPC's authorization metadata) that is the
	// secret of a host of the host table (tracebridge hosts add … --secret-file);
	// its spans become that host's (host.name is replaced). A request
	// without a valid token is refused (401, UNAUTHENTICATED); a disabled
	// host's spans are dropped and answered as taken. Off: tokens are
	// ignored.
	Security bool `yaml:"security"`
	Limits   `yaml:",inline"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return errors.New("listen address missing")
	}
	if err := listenpolicy.Check("listen", c.Listen, c.TLS.Cert != "" || c.TLS.Key != "", c.Insecure, "tls: {cert, key}"); err != nil {
		return err
	}
	if c.MaxMessageSize < 0 || c.MaxInflightBytes < 0 || c.EmitTimeout < 0 || c.DrainTimeout < 0 {
		return errors.New("max_message_size, max_inflight_bytes, emit_timeout and drain_timeout must not be negative")
	}
	if c.MaxInflightBytes > 0 && c.MaxInflightBytes <= 2*c.MaxMessageSize {
		return fmt.Errorf("max_inflight_bytes %d must be more than twice max_message_size %d", c.MaxInflightBytes, c.MaxMessageSize)
	}
	l := c.Limits
	if l.MaxAttributes < 0 || l.MaxEvents < 0 || l.MaxLinks < 0 || l.MaxStringLen < 0 || l.MaxDepth < 0 || l.MaxBatch < 0 {
		return errors.New("limits must not be negative")
	}
	return c.TLS.validate()
}

// codecOptions returns the decoder's limits.
func (c *Config) codecOptions() otlpcodec.Options {
	return otlpcodec.Options{
		MaxMessageSize: c.MaxMessageSize,
		MaxAttributes:  c.MaxAttributes,
		MaxEvents:      c.MaxEvents,
		MaxLinks:       c.MaxLinks,
		MaxStringLen:   c.MaxStringLen,
		MaxDepth:       c.MaxDepth,
		MaxBatch:       c.MaxBatch,
	}
}

func (c *Config) withDefaults(size int) Config {
	d := *c
	if d.MaxMessageSize == 0 {
		d.MaxMessageSize = size
	}
	if d.MaxInflightBytes == 0 {
		d.MaxInflightBytes = DefaultMaxInflightBytes
	}
	d.MaxInflightBytes = max(d.MaxInflightBytes, 2*d.MaxMessageSize+1) // one largest message fits, as gRPC hands it over and copied
	if d.EmitTimeout == 0 {
		d.EmitTimeout = pipeline.Duration(DefaultEmitTimeout)
	}
	if d.DrainTimeout == 0 {
		d.DrainTimeout = pipeline.Duration(DefaultDrainTimeout)
	}
	return d
}

// Factories returns the factories of otlp-grpc and otlp-http.
func Factories() []pipeline.ReceiverFactory {
	return []pipeline.ReceiverFactory{
		pipeline.NewReceiverFactory(TypeGRPC, func() *Config { return &Config{Listen: DefaultGRPCListen} },
			func(c *Config, set pipeline.Settings) (pipeline.Receiver, error) { return NewGRPC(*c, set) }),
		pipeline.NewReceiverFactory(TypeHTTP, func() *Config { return &Config{Listen: DefaultHTTPListen} },
			func(c *Config, set pipeline.Settings) (pipeline.Receiver, error) { return NewHTTP(*c, set) }),
	}
}
