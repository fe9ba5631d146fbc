package profile

import (
	"errors"
	"time"

	"github.com/tracebridge/tracebridge/internal/jfrevents"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Type is the stage type this package builds. serve adds a profile stage
// by itself when a jfr receiver is configured and no profile stage is.
const Type = "profile"

// FactoryConfig is the YAML configuration of a profile stage (see
// Options; zero values select the defaults).
type FactoryConfig struct {
	Types            []string          `yaml:"types"`
	Lines            bool              `yaml:"lines"`
	IgnoreHost       bool              `yaml:"ignore_host"`
	PerThread        int               `yaml:"per_thread"`
	MaxThreads       int               `yaml:"max_threads"`
	MaxSamples       int               `yaml:"max_samples"`
	MaxFrames        int               `yaml:"max_frames"`
	MaxStacks        int               `yaml:"max_stacks"`
	MaxEventsPerSpan int               `yaml:"max_events_per_span"`
	MaxStacksPerSpan int               `yaml:"max_stacks_per_span"`
	Retain           pipeline.Duration `yaml:"retain"`
	History          pipeline.Duration `yaml:"history"`
	// The event browser's window (internal/jfrevents): recent events
	// kept per host and event type, per host, and hosts.
	EventsPerType int `yaml:"events_per_type"`
	EventsPerHost int `yaml:"events_per_host"`
	EventHosts    int `yaml:"event_hosts"`
	// NoSpans is set by serve on a cluster node, not by the YAML
	// (Options.NoSpans).
	NoSpans bool `yaml:"-"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	for _, n := range []int{c.PerThread, c.MaxThreads, c.MaxSamples, c.MaxFrames, c.MaxStacks, c.MaxEventsPerSpan, c.MaxStacksPerSpan,
		c.EventsPerType, c.EventsPerHost, c.EventHosts} {
		if n < 0 {
			return errors.New("limits must not be negative")
		}
	}
	if c.Retain < 0 || c.History < 0 {
		return errors.New("retain and history must not be negative")
	}
	return nil
}

// Options returns the stage's options.
func (c *FactoryConfig) Options() Options {
	return Options{
		Types: c.Types, Lines: c.Lines, IgnoreHost: c.IgnoreHost,
		PerThread: c.PerThread, MaxThreads: c.MaxThreads, MaxSamples: c.MaxSamples, MaxFrames: c.MaxFrames, MaxStacks: c.MaxStacks,
		MaxEventsPerSpan: c.MaxEventsPerSpan, MaxStacksPerSpan: c.MaxStacksPerSpan, Retain: time.Duration(c.Retain),
		History: time.Duration(c.History),
		Events:  jfrevents.Options{PerType: c.EventsPerType, PerHost: c.EventsPerHost, MaxHosts: c.EventHosts},
		NoSpans: c.NoSpans,
	}
}

// Factory returns the factory of profile stages.
func Factory() pipeline.StageFactory {
	return factory{newFactory()}
}

// factory declares the receivers whose data the stage is for: serve adds
// a profile stage (with its defaults) when a jfr receiver is configured
// and no profile stage is.
type factory struct{ pipeline.StageFactory }

// ImpliedBy names the receiver types that bring a profile stage: jfr
// and jfr-http (internal/source/jfr's and internal/source/jfrhttp's Type;
// stages import no sources).
func (factory) ImpliedBy() []string { return []string{"jfr", "jfr-http"} }

func newFactory() pipeline.StageFactory {
	return pipeline.NewStageFactory(Type, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, set pipeline.Settings) (pipeline.Stage, error) {
			opt := c.Options()
			return func(next pipeline.Consumer) pipeline.Consumer {
				st := New(next, opt)
				// The HTTP API's flame graphs of a host (pipeline.Profiles).
				set.Shared.SetProfiles(st)
				if opt.NoSpans {
					// Not a pipeline.Enricher: the engine need not
					// assemble on one goroutine for a stage that
					// attaches nothing.
					return consumer{st}
				}
				return st
			}, nil
		})
}

// consumer hides the Stage's other methods (Enrich) from the engine.
type consumer struct{ pipeline.Consumer }
