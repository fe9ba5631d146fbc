package forward

import (
	"errors"
	"time"

	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Type is the sink type this package builds.
const Type = "forward"

// FactoryConfig is the YAML configuration of a forward sink.
type FactoryConfig struct {
	// URL: kieker-tcp://HOST:PORT or kdb-tcp://HOST:PORT.
	URL string `yaml:"url"`
	// Mapping is the KDB mapping file for kdb-tcp (default: the default
	// mapping).
	Mapping string `yaml:"mapping"`
	// WriteTimeout bounds one write (default 30s).
	WriteTimeout pipeline.Duration `yaml:"write_timeout"`
	// Block is deprecated and ignored: the sink's policy decides (durable
	// waits for the target and never drops; best-effort drops and
	// counts). A configuration that still sets it gets a warning.
	Block *bool `yaml:"block"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	if c.URL == "" {
		return errors.New("url missing (kieker-tcp://host:port or kdb-tcp://host:port)")
	}
	_, err := ParseURL(c.URL)
	return err
}

// Factory returns the factory of forward sinks. The policy decides how
// a sink treats a target that is down: durable (the default) retries with
// back-off and never drops, so the engine's queue fills and the receivers
// wait (brokers are not acknowledged); best-effort never slows the bridge
// and drops and counts what it cannot send.
func Factory() pipeline.SinkFactory {
	return pipeline.NewSinkFactory(Type, pipeline.Durable, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, set pipeline.Settings) (pipeline.BuiltSink, error) {
			if c.Block != nil {
				set.Logger.Warn("forward sink: block is deprecated and ignored; the sink's policy decides (durable: waits for the target, never drops; best-effort: drops and counts)",
					"sink", set.Name, "block", *c.Block, "policy", set.Policy.String())
			}
			cfg := Config{URL: c.URL, Catalog: set.Catalog, WriteTimeout: time.Duration(c.WriteTimeout), Block: set.Policy == pipeline.Durable}
			if c.Mapping != "" {
				m, err := mapping.Load(c.Mapping, set.Catalog)
				if err != nil {
					return nil, err
				}
				cfg.Mapping = m
			}
			s, err := New(cfg, Settings{Logger: set.Logger, Metrics: set.Metrics.Sink(set.Name)})
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			return built{s}, nil
		})
}

type built struct{ *Sink }

func (b built) Where() string { return "sending to " + b.cfg.URL }

// Abort makes a Consume blocked on a peer that stopped reading return: the
// connection is closed under it and its records are dropped and counted.
func (s *Sink) Abort() {
	s.cancel()
	if l := s.cur.Load(); l != nil {
		l.conn.Close()
	}
}

var _ pipeline.Aborter = (*Sink)(nil)
