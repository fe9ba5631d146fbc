package split

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Type is the stage type this package builds.
const Type = "split"

// FactoryConfig is the YAML configuration of a split stage.
type FactoryConfig struct {
	// Boundaries: package:N, regex:P…, map:FILE; the first that matches
	// wins.
	Boundaries []string `yaml:"boundaries"`
	// MaxOpenTraces, MaxDepth, MaxBuffered: see Options (0: defaults).
	MaxOpenTraces int `yaml:"max_open_traces"`
	MaxDepth      int `yaml:"max_depth"`
	MaxBuffered   int `yaml:"max_buffered"`
	// MaxHold: how long records wait behind an incomplete
	// OperationExecutionRecord trace (default 30s).
	MaxHold pipeline.Duration `yaml:"max_hold"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	if len(c.Boundaries) == 0 {
		return errors.New("boundaries missing (package:N, regex:…, map:FILE)")
	}
	_, err := Parse(c.Boundaries...)
	return err
}

// unsplitPerSecond is how many traces passed through unsplit are logged a
// second.
const unsplitPerSecond = 5

// Factory returns the factory of split stages.
func Factory() pipeline.StageFactory {
	return pipeline.NewStageFactory(Type, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, set pipeline.Settings) (pipeline.Stage, error) {
			b, err := Parse(c.Boundaries...)
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			limit := &lograte.Limiter{PerSecond: unsplitPerSecond}
			opt := Options{
				Catalog:       set.Catalog,
				MaxOpenTraces: c.MaxOpenTraces, MaxDepth: c.MaxDepth, MaxBuffered: c.MaxBuffered,
				MaxHold: time.Duration(c.MaxHold),
				OnMalformed: func(m Malformed) {
					limit.Log(context.Background(), set.Logger, slog.LevelWarn, "trace passed through unsplit",
						"stage", set.Name, "trace_id", m.TraceID, "reason", m.Reason)
				},
			}
			return func(next pipeline.Consumer) pipeline.Consumer { return New(b, next, opt) }, nil
		})
}
