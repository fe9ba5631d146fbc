package jfrhttp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Type is the receiver type this package builds.
const Type = "jfr-http"

// IngestPath is where uploads are posted (Pyroscope's path).
const IngestPath = "/ingest"

// Defaults of Config.
const (
	// DefaultListen is Pyroscope's port, on loopback.
	DefaultListen       = "127.0.0.1:4040"
	DefaultMaxBodySize  = 256 << 20
	DefaultMaxChunkSize = 32 << 20
	DefaultMaxUploads   = 4
	DefaultBatchSize    = 1024
	DefaultEmitTimeout  = 30 * time.Second
	DefaultDrainTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading one upload's request.
	DefaultReadTimeout = 5 * time.Minute
)

// TLS names a certificate and its key (PEM files); both empty: plain
// text.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Config is the YAML configuration of a jfr-http receiver.
type Config struct {
	// Listen is host:port (default 127.0.0.1:4040; port 0 picks a free
	// one).
	Listen string `yaml:"listen"`
	TLS    TLS    `yaml:"tls"`
	// Insecure lets the receiver take plain text off loopback
	// (internal/listenpolicy); it says so at start-up.
	Insecure bool `yaml:"insecure"`
	// Security: every upload carries a bearer token (Authorization:
	// Bearer SECRET) that is the secret of a host of the host table
	// (tracebridge hosts add … --secret-file); its events become that
	// host's, whatever name says. A request without a valid token is
	// answered 401; a disabled host's upload is read and dropped.
	Security bool `yaml:"security"`
	// MaxBodySize bounds one upload in bytes, as sent and after
	// decompression (256 MiB).
	MaxBodySize int64 `yaml:"max_body_size"`
	// MaxChunkSize bounds one chunk of a recording (32 MiB; a JVM cuts
	// chunks at its maxchunksize, 12 MB by default): the bytes an upload
	// holds at once.
	MaxChunkSize int64 `yaml:"max_chunk_size"`
	// MaxUploads bounds the uploads read at once (4); more are answered
	// 429 with Retry-After.
	MaxUploads int `yaml:"max_uploads"`
	// Types selects event types (names, names without package, globs
	// such as jdk.GC*); only those are decoded. Empty: all.
	Types []string `yaml:"types"`
	// BatchSize is the number of records handed on at a time (1024).
	BatchSize int `yaml:"batch_size"`
	// EmitTimeout is how long an upload waits for the pipeline to take
	// a batch before it is answered 429 (30s).
	EmitTimeout pipeline.Duration `yaml:"emit_timeout"`
	// DrainTimeout bounds the wait for uploads in flight at shutdown
	// (10s).
	DrainTimeout pipeline.Duration `yaml:"drain_timeout"`
	// ReadTimeout bounds reading one request, body included (5m).
	ReadTimeout pipeline.Duration `yaml:"read_timeout"`
	// Duplicates says what becomes of a finished chunk a host sent
	// before (a loop of jcmd JFR.dump sends the chunks of the recording
	// again each time): "skip" (default) reads it for its constants and
	// hands none of its events on again; "keep" hands them on again.
	Duplicates string `yaml:"duplicates"`
}

// Values of Config.Duplicates.
const (
	DuplicatesSkip = "skip"
	DuplicatesKeep = "keep"
)

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Listen == "" {
		return errors.New("listen address missing")
	}
	if err := listenpolicy.Check("listen", c.Listen, c.TLS.Cert != "" || c.TLS.Key != "", c.Insecure, "tls: {cert, key}"); err != nil {
		return err
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return errors.New("tls: cert and key go together")
	}
	if c.MaxBodySize < 0 || c.MaxChunkSize < 0 || c.MaxUploads < 0 || c.BatchSize < 0 ||
		c.EmitTimeout < 0 || c.DrainTimeout < 0 || c.ReadTimeout < 0 {
		return errors.New("max_body_size, max_chunk_size, max_uploads, batch_size and the timeouts must not be negative")
	}
	if c.MaxChunkSize > 0 && c.MaxChunkSize < codec.HeaderSize {
		return fmt.Errorf("max_chunk_size %d is smaller than a chunk header (%d bytes)", c.MaxChunkSize, codec.HeaderSize)
	}
	switch c.Duplicates {
	case "", DuplicatesSkip, DuplicatesKeep:
	default:
		return fmt.Errorf("duplicates %q: want %s or %s", c.Duplicates, DuplicatesSkip, DuplicatesKeep)
	}
	if _, err := codec.NewFilter(c.Types...); err != nil {
		return fmt.Errorf("types: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxBodySize == 0 {
		c.MaxBodySize = DefaultMaxBodySize
	}
	if c.MaxChunkSize == 0 {
		c.MaxChunkSize = DefaultMaxChunkSize
	}
	if c.MaxUploads == 0 {
		c.MaxUploads = DefaultMaxUploads
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.EmitTimeout == 0 {
		c.EmitTimeout = pipeline.Duration(DefaultEmitTimeout)
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = pipeline.Duration(DefaultDrainTimeout)
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = pipeline.Duration(DefaultReadTimeout)
	}
	if c.Duplicates == "" {
		c.Duplicates = DuplicatesSkip
	}
	return c
}

// tlsConfig loads the certificate (nil without TLS).
func (t TLS) tlsConfig() (*tls.Config, error) {
	if t.Cert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, fmt.Errorf("tls: %w", err))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Factory returns the factory of jfr-http receivers.
func Factory() pipeline.ReceiverFactory {
	return pipeline.NewReceiverFactory(Type, func() *Config { return &Config{Listen: DefaultListen} },
		func(c *Config, set pipeline.Settings) (pipeline.Receiver, error) { return New(*c, set) })
}
