package jfr

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Type is the receiver type this package builds.
const Type = "jfr"

// FactoryConfig is the YAML configuration of a jfr receiver: it follows
// the disk repository of running JVMs (started with
// -XX:StartFlightRecording -XX:FlightRecorderOptions:repository=DIR, or
// given a recording with jcmd PID JFR.start).
type FactoryConfig struct {
	// Repository is the repository root (DIR above; the JVMs write
	// DIR/<time>_<pid>/), or one JVM's directory. It may not exist yet.
	Repository string `yaml:"repository"`
	// Types selects event types (names, names without package, globs such
	// as jdk.GC*); only those are decoded. Empty: all.
	Types []string `yaml:"types"`
	// Host names the monitored host in the records' origin (default: this
	// machine's host name): execution samples are attached to the spans
	// of the same host and thread.
	Host string `yaml:"host"`
	// Start: newest (default) skips what the repository holds when the
	// receiver starts; beginning reads it first. Chunks and JVMs that
	// appear later are always read from their beginning.
	Start string `yaml:"start"`
	// PollInterval is how often the repository is looked at (default
	// 100ms); StaleAfter how long the chunk of a JVM that is gone may stay
	// unchanged before it is given up (default 30s).
	PollInterval pipeline.Duration `yaml:"poll_interval"`
	StaleAfter   pipeline.Duration `yaml:"stale_after"`
	// BatchSize is the number of records handed on at a time (default
	// 1024).
	BatchSize int `yaml:"batch_size"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	if c.Repository == "" {
		return errors.New("repository missing: the directory given to -XX:FlightRecorderOptions:repository=DIR")
	}
	_, err := c.config()
	return err
}

func (c *FactoryConfig) config() (Config, error) {
	start, err := ParseStart(c.Start)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		Path:         c.Repository,
		Follow:       true,
		Start:        start,
		Types:        c.Types,
		PollInterval: time.Duration(c.PollInterval),
		StaleAfter:   time.Duration(c.StaleAfter),
		BatchSize:    c.BatchSize,
		Host:         c.Host,
	}
	return cfg, cfg.Validate()
}

// Factory returns the factory of jfr receivers.
func Factory() pipeline.ReceiverFactory {
	return pipeline.NewReceiverFactory(Type, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, set pipeline.Settings) (pipeline.Receiver, error) {
			cfg, err := c.config()
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			cfg.Name = set.Name
			if cfg.Host == "" {
				cfg.Host, _ = os.Hostname()
			}
			src, err := New(cfg, Settings{Logger: set.Logger, Metrics: set.Metrics.Receiver(set.Name)})
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			return &receiver{Source: src, path: c.Repository}, nil
		})
}

// receiver is a following Source as a pipeline.Receiver.
type receiver struct {
	*Source
	path string
}

func (r *receiver) Where() string { return "following the JFR repository " + r.path }

func (r *receiver) Close() error { return nil }

// Run follows the repository until ctx ends, then hands on what it read
// and returns.
func (r *receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	return r.Source.Run(ctx, out)
}

// Detect reports whether path holds JFR data: a file that begins with a
// chunk header's magic ("FLR\0"), or a directory holding chunk files
// (*.jfr that do) directly or in its subdirectories (a repository root
// with JVM directories).
func Detect(path string) bool {
	info, err := os.Stat(path)
	if err != nil {
		return false
	}
	if !info.IsDir() {
		return hasMagic(path)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".jfr") && hasMagic(filepath.Join(path, e.Name())) {
			return true
		}
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub, err := os.ReadDir(filepath.Join(path, e.Name()))
		if err != nil {
			continue
		}
		for _, f := range sub {
			if !f.IsDir() && strings.HasSuffix(f.Name(), ".jfr") && hasMagic(filepath.Join(path, e.Name(), f.Name())) {
				return true
			}
		}
	}
	return false
}

func hasMagic(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return b == codec.Magic
}
